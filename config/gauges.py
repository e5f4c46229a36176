"""The queue's gauges for /metrics: deliveries by status and dead letters.

Here in `config/` because it reads both `deliveries` and `dlq`: `deliveries` may not
import `dlq.models` (models point webhooks <- deliveries <- dlq).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.db.models import Count, Min
from django.utils import timezone

from deliveries.models import Delivery
from dlq.models import DeadLetter


@dataclass(frozen=True)
class QueueGauges:
    deliveries_by_status: dict[str, int]
    dead_letters_waiting: int
    oldest_dead_letter_age: float  # seconds; 0 when none waits
    delivery_lag: float  # seconds the most overdue pending attempt is late; 0 when none


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


def queue_gauges() -> QueueGauges:
    now = timezone.now()
    by_status = {status: 0 for status in Delivery.Status.values}
    for row in Delivery.objects.values("status").annotate(n=Count("id")).order_by():
        by_status[row["status"]] = row["n"]
    waiting = DeadLetter.objects.filter(replayed_at__isnull=True).aggregate(
        n=Count("id"), oldest=Min("dead_at")
    )
    # The partial index delivery_due answers this with one index read.
    most_overdue = (
        Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("next_attempt_at", flat=True)
        .first()
    )
    return QueueGauges(
        deliveries_by_status=by_status,
        dead_letters_waiting=waiting["n"],
        oldest_dead_letter_age=(now - waiting["oldest"]).total_seconds()
        if waiting["oldest"]
        else 0.0,
        delivery_lag=(now - most_overdue).total_seconds() if most_overdue else 0.0,
    )
