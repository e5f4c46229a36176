"""In-flight accounting: how many attempts this process has under way, in all and per
endpoint. The one place capacity is counted; every slot taken is given back once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable


class Slots:
    """`capacity` attempts under way per process, `per_endpoint` requests open per endpoint.

    A claim first `reserve`s room (waiting for it), then `admit`s what it claimed. An
    admitted delivery holds its endpoint slot until its request is over (`leave`) and its
    capacity slot until its result is recorded (`free`); `release` does both, for an
    attempt that never started. Claims ask each endpoint for at most its `room`.
    """

    def __init__(
        self,
        *,
        capacity: int,
        per_endpoint: int,
        on_endpoint_room: Callable[[], None] = lambda: None,
    ) -> None:
        self.capacity = capacity
        self.per_endpoint = per_endpoint
        self._used = 0  # reserved or admitted
        self._endpoints: Counter[str] = Counter()
        self._last_left: dict[str, float] = {}  # endpoint -> monotonic time of its last answer
        self._changed = threading.Condition()
        self._on_endpoint_room = on_endpoint_room

    @property
    def in_flight(self) -> int:
        with self._changed:
            return self._used

    def reserve(self, wanted: int, *, at_least: int = 1, timeout: float | None = None) -> int:
        """Wait until `at_least` slots are free (or `timeout`), take up to `wanted`."""
        enough = max(1, min(wanted, at_least))
        with self._changed:
            if not self._changed.wait_for(lambda: self.capacity - self._used >= enough, timeout):
                return 0
            granted = min(wanted, self.capacity - self._used)
            self._used += granted
            return granted

    def admit(self, endpoint_ids: Iterable[str], reserved: int) -> list[bool]:
        """For each claimed delivery's endpoint: may it go now (under the endpoint's
        cap)? Reservations not turned into admissions are freed."""
        verdict = []
        with self._changed:
            for endpoint in endpoint_ids:
                ok = self._endpoints[endpoint] < self.per_endpoint and reserved > 0
                if ok:
                    self._endpoints[endpoint] += 1
                    reserved -= 1
                verdict.append(ok)
            self._used -= reserved
            self._changed.notify_all()
        return verdict

    def cancel(self, reserved: int) -> None:
        """Give back reservations that were not admitted (the claim failed)."""
        with self._changed:
            self._used -= reserved
            self._changed.notify_all()

    def room(self, endpoint_id: str) -> int:
        """How many more requests this process may open to the endpoint."""
        with self._changed:
            return max(0, self.per_endpoint - self._endpoints[endpoint_id])

    def moving(self, endpoint_id: str, within: float) -> bool:
        """Whether the endpoint has room, or answered a request in the last `within`
        seconds (full, but not stuck)."""
        with self._changed:
            if self._endpoints[endpoint_id] < self.per_endpoint:
                return True
            return time.monotonic() - self._last_left.get(endpoint_id, float("-inf")) < within

    def full(self) -> set[str]:
        """Endpoints this process may open no more requests to now."""
        with self._changed:
            return {e for e, n in self._endpoints.items() if n >= self.per_endpoint}

    def leave(self, endpoint_id: str) -> None:
        """An admitted attempt's request is over: its endpoint slot is free, and the claims
        are woken. (Every time: a claim takes whatever room gathered while the previous one
        ran, so they batch by themselves; waking once per ten finished requests left a
        worker holding fewer than ten asleep until its idle poll.)"""
        with self._changed:
            self._endpoints[endpoint_id] -= 1
            if self._endpoints[endpoint_id] <= 0:
                del self._endpoints[endpoint_id]
                self._last_left.pop(endpoint_id, None)
            else:
                self._last_left[endpoint_id] = time.monotonic()
        self._on_endpoint_room()

    def free(self) -> None:
        """An admitted attempt is over and recorded: its capacity slot is free."""
        with self._changed:
            self._used -= 1
            self._changed.notify_all()

    def release(self, endpoint_id: str) -> None:
        """An admitted attempt that will not happen (or never reached the recorder)."""
        self.leave(endpoint_id)
        self.free()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no slot is taken; False if some still were after `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: self._used == 0, timeout=timeout)
