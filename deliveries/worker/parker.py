"""Parking: a deactivated endpoint's backlog goes to the dead-letter queue in bounded
batches on a thread of its own, never on the recorder's (whose batches other tenants'
results wait for), however deep the backlog."""

from __future__ import annotations

import logging
import queue
import threading

from django.db import close_old_connections, connection

from deliveries.lifecycle.interventions import deliveries_kill_for_endpoint, endpoint_deactivate

logger = logging.getLogger(__name__)


class Parker:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="homing-parker", daemon=True)
        self._thread.start()

    def park_later(self, endpoint_id: str, reason: str) -> None:
        """Deactivate the endpoint (with `reason`) and park its backlog, on the thread."""
        self._queue.put((endpoint_id, reason))

    def _run(self) -> None:
        try:
            while (item := self._queue.get()) is not None:
                endpoint_id, reason = item
                try:
                    close_old_connections()
                    if endpoint_deactivate(endpoint_id=endpoint_id, reason=reason):
                        deliveries_kill_for_endpoint(
                            endpoint_id=endpoint_id, reason="endpoint deactivated"
                        )
                except Exception:
                    logger.exception("parking the deliveries of %s failed", endpoint_id)
        finally:
            connection.close()  # this thread's own: nothing else would close it

    def close(self, timeout: float) -> None:
        """End the thread once what was queued is parked (waiting `timeout` at most)."""
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=timeout)
