"""The releases thread: ended requests' places in the cluster-wide cap, given back in
batches (the ledger keeps them; this thread only sends them).

A place left held after its answer is room another worker does not see: released with
the recorder's batches, places stayed held ~50 ms and one endpoint's drain ran at half
speed. So the ledger notes each ended request as it ends (on the event loop) and this
thread sends them, a batch per Redis round trip, RELEASE_GATHER_SECONDS after the first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from deliveries.worker.ledger import Ledger
from deliveries.worker.supervisor import Heartbeat

# Ended requests' cluster places are given back at most this long after their answer.
RELEASE_GATHER_SECONDS = 0.002


class Releases:
    def __init__(self, ledger: Ledger, *, lease_seconds: Callable[[], float]) -> None:
        self._ledger = ledger
        self._lease_seconds = lease_seconds
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.heartbeat = Heartbeat()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="homing-releases", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        waiting = self._ledger.releases_waiting
        while not self._closing.is_set():
            waiting.wait()
            # Gather what ends meanwhile. (An Event's wait, not time.sleep: under
            # libfaketime, the clock-skew test's, a 2 ms clock_nanosleep now and then
            # failed with EINVAL and the thread died.)
            self._closing.wait(RELEASE_GATHER_SECONDS)
            waiting.clear()
            with self.heartbeat.working():
                self._ledger.send_releases(lease_seconds=self._lease_seconds())

    def close(self, timeout: float) -> None:
        """End the thread, then send what it had not sent yet (requests that ended while
        the worker closed its event loop included)."""
        self._closing.set()
        self._ledger.releases_waiting.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
        self._ledger.send_releases(lease_seconds=self._lease_seconds())
