"""The worker process's dispatcher: one thread that claims due deliveries in batches.

Celery messages only wake it up (and name deliveries to claim first); it then claims
batch after batch for as long as full batches come back and the sending threads have
room. So a backlog costs one claim per BATCH_SIZE deliveries and almost no Celery
messages: handling a message cost a worker more CPU than sending a webhook.

When idle it also looks for due work every IDLE_POLL_SECONDS, with a read-only query.
That is how a second worker process joins a backlog that one wake-up started, and it
keeps deliveries moving (at poll latency) while the broker is down.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence

from django.db import DatabaseError, connection

from deliveries import queue
from deliveries.policy import current_policy
from deliveries.services.attempts import BATCH_SIZE, attempts_start, pipeline
from deliveries.services.claims import deliveries_claim, deliveries_due_exist

logger = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.25
ERROR_PAUSE_SECONDS = 1.0


class Dispatcher:
    def __init__(self) -> None:
        self._hints: list[str] = []  # deliveries that messages named, claimed first
        self._lock = threading.Lock()
        self._message = False  # a Celery message woke us (so the doorbell is up)
        self._woken = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="homing-dispatcher", daemon=True)
        self._thread.start()

    def wake(self, delivery_ids: Sequence[str] = ()) -> None:
        with self._lock:
            self._hints.extend(delivery_ids)
            self._message = True
        self._woken.set()

    def endpoint_has_room(self) -> None:
        """An endpoint claims skipped can take more: claim again now, not at the poll."""
        self._woken.set()

    def stop(self) -> None:
        """Claim nothing more (a warm shutdown); attempts under way carry on."""
        self._stopping.set()
        self._woken.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            woken = self._woken.wait(IDLE_POLL_SECONDS)
            self._woken.clear()
            with self._lock:
                message, self._message = self._message, False
            try:
                if message:
                    # Before claiming, so a wake-up skipped while the doorbell was up
                    # is covered by the claims below (see queue.py).
                    queue.doorbell_answered()
                elif not woken and not deliveries_due_exist():
                    continue
                while not self._stopping.is_set() and self._dispatch_batch():
                    pass
            except DatabaseError:
                # PostgreSQL restarting: reconnect on the next round.
                logger.warning("database unavailable while claiming; retrying", exc_info=True)
                connection.close()
                self._stopping.wait(ERROR_PAUSE_SECONDS)
            except Exception:
                logger.exception("claiming deliveries failed; retrying")
                self._stopping.wait(ERROR_PAUSE_SECONDS)

    def _dispatch_batch(self) -> bool:
        """Claim and start one batch; True when more due work is likely waiting."""
        line, policy = pipeline(), current_policy()
        reserved = line.reserve(BATCH_SIZE)
        with self._lock:
            hints, self._hints = self._hints[:reserved], self._hints[reserved:]
            more_hints = bool(self._hints)
        try:
            claimed = deliveries_claim(
                delivery_ids=hints,
                limit=reserved,
                policy=policy,
                skip_endpoints=line.busy_endpoints(),
            )
        except BaseException:
            line.cancel(reserved)
            raise
        attempts_start(claimed=claimed, reserved=reserved, policy=policy)
        return len(claimed) == reserved or more_hints


@functools.cache
def dispatcher() -> Dispatcher:
    created = Dispatcher()
    pipeline().on_endpoint_room = created.endpoint_has_room
    return created
