"""The queue's gauges for /metrics, bounded in cost (dlq.selectors.queue_gauges_bounded)
and cached a few seconds per process."""

from __future__ import annotations

import threading
import time

from dlq.selectors import QueueGauges, queue_gauges_bounded

# Scrapes every few seconds from several Prometheus servers reuse the figures this long.
CACHE_SECONDS = 10.0
_cache_lock = threading.Lock()
_cached: tuple[float, QueueGauges] | None = None


def queue_gauges_cached() -> QueueGauges:
    global _cached
    with _cache_lock:
        cached = _cached
    if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
        return cached[1]
    # Read outside the lock: a slow database makes one scrape slow, not every scrape
    # of this process wait behind it (two reads at once are harmless).
    gauges = queue_gauges_bounded()
    with _cache_lock:
        _cached = (time.monotonic(), gauges)
    return gauges
