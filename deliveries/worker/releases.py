"""Finished requests' places in the cluster-wide cap (concurrency.py), given back in
batches by a thread of their own.

A place left held after its answer is room another worker does not see: released with
the recorder's batches, places stayed held ~50 ms and one endpoint's drain ran at half
speed. So each finished request is noted here as it ends (on the event loop) and the
releases thread gives them back a batch per Redis round trip, RELEASE_GATHER_SECONDS
after the first. A delivery next in line that took a finished one's place is a hand-over:
the endpoint's count stays, the member changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from deliveries.worker import concurrency
from deliveries.worker.supervisor import Heartbeat

# Finished requests' cluster slots are given back at most this long after their answer.
RELEASE_GATHER_SECONDS = 0.002


class Cluster(Protocol):
    """The cluster-wide cap as the worker uses it (the concurrency module is one; tests
    give a fake)."""

    def acquire(
        self, *, endpoint_ids: Sequence[str], delivery_ids: Sequence[str], lease_seconds: float
    ) -> list[bool]: ...

    def rooms(self, *, endpoint_ids: Sequence[str]) -> dict[str, int]: ...

    def hand_over(
        self, *, handed: Sequence[tuple[str, str, str]], lease_seconds: float
    ) -> None: ...

    def release_many(self, *, finished: Sequence[tuple[str, str]]) -> None: ...

    def renew(self, *, held: Sequence[tuple[str, str]], lease_seconds: float) -> None: ...

    def workers_sending(
        self, *, worker: str, sending: bool = True, within: float = 10.0
    ) -> int: ...


class Releases:
    def __init__(
        self, *, lease_seconds: Callable[[], float], cluster: Cluster = concurrency
    ) -> None:
        self._lease_seconds = lease_seconds
        self._cluster = cluster
        self._finished: list[tuple[str, str]] = []  # (endpoint, delivery) requests over
        # (endpoint, finished delivery, next delivery): slots handed over.
        self._handed: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # one batch at a time, in order
        self._waiting = threading.Event()
        self._closing = threading.Event()
        self.heartbeat = Heartbeat()

    def finished(self, endpoint_id: str, delivery_id: str) -> None:
        """A request is over: its place goes back with the next batch."""
        with self._lock:
            self._finished.append((endpoint_id, delivery_id))
        self._waiting.set()

    def handed_over(self, endpoint_id: str, finished_id: str, next_id: str) -> None:
        """The delivery next in line took a finished one's place."""
        with self._lock:
            self._handed.append((endpoint_id, finished_id, next_id))
        self._waiting.set()

    def run_until_closed(self) -> None:
        """The releases thread: until close(), after the worker's drain, so attempts
        finishing while it drains are released too."""
        while not self._closing.is_set():
            self._waiting.wait()
            # Gather what finishes meanwhile. (An Event's wait, not time.sleep: under
            # libfaketime, the clock-skew test's, a 2 ms clock_nanosleep now and then
            # failed with EINVAL and the thread died.)
            self._closing.wait(RELEASE_GATHER_SECONDS)
            self._waiting.clear()
            with self.heartbeat.working():
                self.send()

    def send(self) -> None:
        """Give back what finished so far (also called by the claims before a claim, so
        it does not see its own finished requests' places still held)."""
        # Hand-overs before releases, one batch at a time: a delivery handed a slot may
        # finish (and be released) before the hand-over reached Redis.
        with self._sending:
            with self._lock:
                finished, self._finished = self._finished, []
                handed, self._handed = self._handed, []
            self._cluster.hand_over(handed=handed, lease_seconds=self._lease_seconds())
            self._cluster.release_many(finished=finished)

    def close(self) -> None:
        """End the thread (the caller joins it, then sends what is left)."""
        self._closing.set()
        self._waiting.set()
