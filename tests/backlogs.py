"""Due deliveries written straight to the database, as if their wake-up messages were
lost: only the workers' own search for due work can find them."""

from __future__ import annotations

from django.utils import timezone

from deliveries.models import Delivery
from deliveries.services.sequences import sequences_take
from webhooks.models import Endpoint, Event, Tenant


def due_backlog(
    tenant: Tenant, endpoint: Endpoint, count: int, event_type: str = "a.x"
) -> list[Event]:
    """`count` events of `tenant`, each with one delivery to `endpoint`, due now."""
    now = timezone.now()
    events = Event.objects.bulk_create(
        Event(tenant=tenant, type=event_type, data={"n": n}) for n in range(count)
    )
    Delivery.objects.bulk_create(
        Delivery(
            tenant=tenant,
            event=event,
            endpoint=endpoint,
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
            sequence=sequence,
        )
        for event, sequence in zip(events, sequences_take([endpoint.pk] * len(events)), strict=True)
    )
    return events
