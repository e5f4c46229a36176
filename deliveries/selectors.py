"""Read-only queries about deliveries, for metrics and the UI."""

from __future__ import annotations

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


def queue_gauges() -> QueueGauges:
    now = timezone.now()
    by_status = {status: 0 for status in Delivery.Status.values}
    for row in Delivery.objects.values("status").annotate(n=Count("id")).order_by():
        by_status[row["status"]] = row["n"]
    waiting = DeadLetter.objects.filter(
        replayed_at__isnull=True, discarded_at__isnull=True
    ).aggregate(n=Count("id"), oldest=Min("dead_at"))
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
