"""The recorder thread: writes whatever results have arrived, in batches.

Sends never wait on the database, a slow attempt never delays recording a fast one, and
a busy worker writes many results per transaction (recording.py does the writing and
sanitising). It gives up on a batch only when the database stays unavailable for
WRITE_PATIENCE_SECONDS, which is shorter than the lease margin: the sweep then records
those deliveries as `worker lost` and retries them (at least once).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connection

from core import tracing
from deliveries.lifecycle.policy import LEASE_MARGIN_SECONDS
from deliveries.lifecycle.recording import (
    DATABASE_UNAVAILABLE,
    Attempted,
    Recorded,
    attempts_record,
)
from deliveries.worker.supervisor import Heartbeat

logger = logging.getLogger(__name__)

MAX_BATCH = 200  # results written per transaction at most
WRITE_PATIENCE_SECONDS = 10
assert WRITE_PATIENCE_SECONDS < LEASE_MARGIN_SECONDS, "a lease must outlast the patience"

Done = Callable[[Recorded | None], None]


class Recorder:
    def __init__(self, *, on_deactivate: Callable[[str, str], None]) -> None:
        self._queue: queue.SimpleQueue[tuple[Attempted, Done] | None] = queue.SimpleQueue()
        self._on_deactivate = on_deactivate
        self._thread: threading.Thread | None = None
        self.heartbeat = Heartbeat()  # one batch at a time (the watchdog's patience)

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self) -> None:
        """Start the recording thread (its owner, the Worker, calls this once, then stop)."""
        self._thread = threading.Thread(target=self._run, name="homing-recorder", daemon=True)
        self._thread.start()

    def submit(self, outcome: Attempted, done: Done) -> None:
        """Record `outcome`; `done` is called with what was recorded, whatever happens."""
        self._queue.put((outcome, done))

    def stop(self) -> None:
        """Record what was submitted, then end the thread (waiting a bounded time)."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join(timeout=WRITE_PATIENCE_SECONDS + 5)

    def _run(self) -> None:
        try:
            self._record_until_stopped()
        finally:
            connection.close()  # this thread's own: nothing else would close it

    def _record_until_stopped(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            with self.heartbeat.working():  # the whole batch, callbacks included
                self._record_batch(item)

    def _record_batch(self, item: tuple[Attempted, Done]) -> None:
        batch = [item]
        while len(batch) < MAX_BATCH:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is None:
                self._queue.put(None)  # stop after this batch
                break
            batch.append(more)
        recorded: list[Recorded | None] = [None] * len(batch)
        try:
            recorded = self._write_with_patience([outcome for outcome, _ in batch])
        finally:
            for (_, done), item_recorded in zip(batch, recorded, strict=True):
                done(item_recorded)
        deactivate = {
            r.deactivate_endpoint: r.deactivate_reason
            for r in recorded
            if r and r.deactivate_endpoint
        }
        for endpoint_id, reason in deactivate.items():
            self._on_deactivate(endpoint_id, reason)

    def _write_with_patience(self, outcomes: list[Attempted]) -> list[Recorded | None]:
        deadline = time.monotonic() + WRITE_PATIENCE_SECONDS
        while True:
            try:
                close_old_connections()
                return _record(outcomes)
            except DATABASE_UNAVAILABLE:
                connection.close()
                if time.monotonic() > deadline:
                    logger.error(
                        "gave up recording %d attempts (database unavailable); their "
                        "leases expire and the scheduler retries them",
                        len(outcomes),
                    )
                    return [None] * len(outcomes)
                logger.warning("database unavailable while recording; retrying")
                time.sleep(1)
            except Exception:
                logger.exception("recording %d attempts failed", len(outcomes))
                return [None] * len(outcomes)


def _record(outcomes: list[Attempted]) -> list[Recorded | None]:
    """attempts_record, in a span of its own while tracing is on (a batch of many events'
    attempts belongs to no one trace: a root span, each attempt's span has the detail)."""
    tracer = tracing.tracer
    if tracer is None:
        return attempts_record(outcomes=outcomes)
    with tracer.start_as_current_span(
        "record attempts", attributes={"homing.attempts": len(outcomes)}
    ):
        return attempts_record(outcomes=outcomes)
