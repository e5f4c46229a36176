"""Pacing: the endpoints' rate limits and the retry budget, as the claim loop and the
attempts consult them.

- Rate limits (rate_limits.py, shared across workers): a claimed batch gets each
  delivery's send delay; one that may go within RATE_HOLD_SECONDS is held until then,
  the others are given back without spending an attempt and their endpoint is skipped by
  claims until its next send time. On the event loop, attempts to one rate-limited
  endpoint stay at least one interval apart even when a busy loop fires timers late.
- The retry budget (budget.py): while first attempts wait, retries get only their share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from deliveries.lifecycle.in_hand import InHand
from deliveries.worker import rate_limits
from deliveries.worker.budget import RetryBudget
from deliveries.worker.fair_share import DueEndpoint
from deliveries.worker.planner import RATE_HOLD_SECONDS

D = TypeVar("D", bound=InHand)

# An endpoint at its cap whose first attempts wait counts for the retry budget while it
# answered a request this recently (budget.py).
FIRSTS_MOVING_SECONDS = 1.0


class Pacing:
    def __init__(self, *, retry_budget: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = RetryBudget(retry_budget)
        self._clock = clock
        self._lock = threading.Lock()
        self._throttled: dict[str, float] = {}  # endpoint -> clock time it may go again
        self._with_firsts: set[str] = set()  # endpoints whose first attempts wait
        self._last_sent: dict[str, float] = {}  # endpoint -> loop time (the loop's only)

    # --- rate limits (the claim loop) ---------------------------------------------------

    def throttled_endpoints(self) -> set[str]:
        """Endpoints rate-limited until later: claims leave them alone meanwhile."""
        now = self._clock()
        with self._lock:
            for endpoint_id in [e for e, until in self._throttled.items() if until <= now]:
                del self._throttled[endpoint_id]
            return set(self._throttled)

    def send_delays(
        self, deliveries: Sequence[D], rate_limit: Callable[[D], int | None]
    ) -> tuple[list[tuple[D, float]], list[tuple[D, float]]]:
        """(those that may go, each with its delay; those to give back, each with how long
        until its endpoint's next send time, which claims skip until then)."""
        delays = rate_limits.send_delays(
            endpoint_ids=[d.endpoint_id for d in deliveries],
            limits={d.endpoint_id: limit for d in deliveries if (limit := rate_limit(d))},
            hold=RATE_HOLD_SECONDS,
        )
        timed = [(d, delay) for d, delay in zip(deliveries, delays, strict=True) if delay >= 0]
        later = [(d, -delay) for d, delay in zip(deliveries, delays, strict=True) if delay < 0]
        if later:
            now = self._clock()
            with self._lock:
                for delivery, wait in later:
                    self._throttled[delivery.endpoint_id] = now + wait
        return timed, later

    # --- spacing on the event loop ------------------------------------------------------

    def too_early(self, endpoint_id: str, rate_limit: int, now: float) -> float:
        """Seconds until an attempt to the endpoint may start (0: now, and it is noted):
        timers that a busy event loop fires late fire together."""
        gap = rate_limits.interval(rate_limit)
        early = self._last_sent.get(endpoint_id, -gap) + gap - now
        if early > 0:
            return early
        self._last_sent[endpoint_id] = now
        return 0.0

    # --- the retry budget (the claim loop) ----------------------------------------------

    def retry_allowance(
        self, due: Collection[DueEndpoint], moving: Callable[[str, float], bool]
    ) -> int | None:
        """How many retries the next claim may take (None: as many as it likes). An
        endpoint at its cap counts while it answers (its first attempts wait for the
        workers' sends); a stuck one does not hold retries to everyone else back."""
        with self._lock:
            with_firsts = set(self._with_firsts)
        firsts_waiting = any(
            e.id in with_firsts and moving(e.id, FIRSTS_MOVING_SECONDS) for e in due
        )
        return self.budget.retry_allowance(firsts_waiting=firsts_waiting)

    def claimed(self, deliveries: Sequence[InHand], exhausted: Collection[str]) -> None:
        """What a claim took: the budget counts its retries and first attempts, and the
        endpoints whose first attempts wait are noted (those exhausted have none)."""
        firsts = [d.endpoint_id for d in deliveries if d.attempts_in_schedule == 1]
        with self._lock:
            self._with_firsts = (self._with_firsts | set(firsts)) - set(exhausted)
        self.budget.claimed(retries=len(deliveries) - len(firsts), firsts=len(firsts))
