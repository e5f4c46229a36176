"""State changes of deliveries that are not an HTTP attempt."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from deliveries.models import Delivery
from dlq.services.dead_letters import dead_letters_create


@transaction.atomic
def deliveries_kill_for_endpoint(*, endpoint_id: str, reason: str) -> int:
    """Move an endpoint's pending deliveries to the dead-letter queue; returns how many.

    Deliveries a worker holds right now finish their attempt; the worker then finds the
    endpoint inactive and parks them too.
    """
    now = timezone.now()
    doomed = list(
        Delivery.objects.select_for_update()
        .select_related("event")
        .filter(endpoint_id=endpoint_id, status=Delivery.Status.PENDING)
    )
    if not doomed:
        return 0
    Delivery.objects.filter(pk__in=[d.pk for d in doomed], status=Delivery.Status.PENDING).update(
        status=Delivery.Status.DEAD, next_attempt_at=None, dispatched_until=None,
        last_error=reason, updated_at=now,
    )
    dead_letters_create(deliveries=doomed, reasons=[reason] * len(doomed), dead_at=now)
    return len(doomed)
