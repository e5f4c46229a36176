from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.utils import timezone

from deliveries.models import Delivery
from deliveries.queue import publish_deliveries_on_commit
from webhooks.models import Endpoint, Event


def deliveries_create_for_event(*, event: Event, endpoints: Iterable[Endpoint]) -> list[Delivery]:
    """One pending delivery per endpoint, due now, published when the transaction commits."""
    return deliveries_create_for_events(fan_out=[(event, list(endpoints))])[0]


def deliveries_create_for_events(
    *, fan_out: Sequence[tuple[Event, Sequence[Endpoint]]]
) -> list[list[Delivery]]:
    """Each event's deliveries (in order) from one multi-row INSERT and one wake-up."""
    now = timezone.now()
    per_event = [
        [
            Delivery(
                tenant_id=event.tenant_id,
                event=event,
                endpoint=endpoint,
                next_attempt_at=now,
                created_at=now,
                updated_at=now,
            )
            for endpoint in endpoints
        ]
        for event, endpoints in fan_out
    ]
    every = [delivery for deliveries in per_event for delivery in deliveries]
    Delivery.objects.bulk_create(every)
    publish_deliveries_on_commit([delivery.id for delivery in every])
    return per_event
