"""HOMING_ENDPOINT_CONCURRENCY without Redis: the twin of concurrency.py's scripts.

The embedded set-up runs one worker process, so the per-endpoint sets of deliveries in
flight, their leases and the ramps of recovering endpoints are kept in its memory, under
the same rules as the Redis scripts (a member lapses with its lease, a ramp lowers the
cap until successes double it back to the cap).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence


class LocalConcurrency:
    """The rules of concurrency.py's scripts for one process, when there is no Redis."""

    def __init__(self, *, ramp_start: int, ramp_seconds: float) -> None:
        self._ramp_start, self._ramp_seconds = ramp_start, ramp_seconds
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, float]] = {}  # endpoint -> delivery -> lapses at
        self._ramps: dict[str, tuple[int, float]] = {}  # endpoint -> (cap, forgotten at)

    def room(self, endpoint_id: str, cap: int) -> int:
        now = time.monotonic()
        held = self._held.get(endpoint_id, {})
        for delivery_id in [d for d, until in held.items() if until <= now]:
            del held[delivery_id]
        ramp, forgotten_at = self._ramps.get(endpoint_id, (cap, float("inf")))
        if forgotten_at <= now:
            del self._ramps[endpoint_id]
            ramp = cap
        return max(0, min(cap, ramp) - len(held))

    def rooms(self, endpoint_ids: Sequence[str], cap: int) -> dict[str, int]:
        with self._lock:
            return {e: self.room(e, cap) for e in endpoint_ids}

    def acquire(
        self, endpoint_ids: Sequence[str], delivery_ids: Sequence[str], cap: int, lease: float
    ) -> list[bool]:
        with self._lock:
            verdict = []
            for endpoint_id, delivery_id in zip(endpoint_ids, delivery_ids, strict=True):
                ok = self.room(endpoint_id, cap) > 0
                if ok:
                    self._held.setdefault(endpoint_id, {})[delivery_id] = time.monotonic() + lease
                verdict.append(ok)
            return verdict

    def release(self, finished: Sequence[tuple[str, str]]) -> None:
        with self._lock:
            for endpoint_id, delivery_id in finished:
                held = self._held.get(endpoint_id)
                if held is not None:
                    held.pop(delivery_id, None)
                    if not held:
                        del self._held[endpoint_id]

    def renew(self, held: Sequence[tuple[str, str]], lease: float) -> None:
        with self._lock:
            now = time.monotonic()
            for endpoint_id, delivery_id in held:
                places = self._held.get(endpoint_id, {})
                if places.get(delivery_id, now) > now:  # still held: a lapsed one stays out
                    places[delivery_id] = now + lease

    def hand_over(self, handed: Sequence[tuple[str, str, str]], lease: float) -> None:
        with self._lock:
            for endpoint_id, finished_id, next_id in handed:
                held = self._held.setdefault(endpoint_id, {})
                held.pop(finished_id, None)
                held[next_id] = time.monotonic() + lease

    def ramp_start(self, endpoint_id: str) -> None:
        with self._lock:
            self._ramps[endpoint_id] = (self._ramp_start, time.monotonic() + self._ramp_seconds)

    def ramp_grow(self, endpoint_ids: Sequence[str], cap: int) -> None:
        with self._lock:
            for endpoint_id in endpoint_ids:
                if endpoint_id in self._ramps:
                    ramp = self._ramps[endpoint_id][0] * 2
                    if ramp >= cap:
                        del self._ramps[endpoint_id]
                    else:
                        self._ramps[endpoint_id] = (ramp, time.monotonic() + self._ramp_seconds)
