"""The queue's gauges for /metrics, cached so that scrapes do not count tables."""

from __future__ import annotations

import threading
import time

from dlq.selectors import QueueGauges, queue_gauges

# A scrape every few seconds from several Prometheus servers must not count the
# deliveries table each time: the figures are reused for this long per process.
CACHE_SECONDS = 10.0
_cache_lock = threading.Lock()
_cached: tuple[float, QueueGauges] | None = None


def queue_gauges_cached() -> QueueGauges:
    global _cached
    with _cache_lock:
        if _cached is not None and time.monotonic() - _cached[0] < CACHE_SECONDS:
            return _cached[1]
        gauges = queue_gauges()
        _cached = (time.monotonic(), gauges)
        return gauges
