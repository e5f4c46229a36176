from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from deliveries.models import Delivery
from deliveries.services.creation import deliveries_create_for_events
from webhooks.models import Endpoint, Event, Tenant
from webhooks.services.event_input import EventInput


def event_ingest(*, tenant: Tenant, event_type: str, data: dict[str, Any]) -> Event:
    """Record an event and one delivery per matching active endpoint, in one transaction.

    The first attempts are published only after commit (the outbox pattern): a crash
    before commit leaves nothing, a crash after leaves rows the scheduler will find.
    """
    return events_ingest(tenant=tenant, inputs=[EventInput(type=event_type, data=data)])[0]


@transaction.atomic
def events_ingest(*, tenant: Tenant, inputs: Sequence[EventInput]) -> list[Event]:
    """Record many events (all or nothing) with two multi-row INSERTs and one wake-up.

    Each returned event carries its deliveries (`event.deliveries.all()` is served from
    memory), in the order of `inputs`.
    """
    events = [Event(tenant=tenant, type=item.type, data=item.data) for item in inputs]
    Event.objects.bulk_create(events)
    endpoints = list(
        Endpoint.objects.filter(tenant=tenant, is_active=True).only("id", "event_types")
    )
    per_event = deliveries_create_for_events(
        fan_out=[
            (event, [endpoint for endpoint in endpoints if endpoint.matches(event.type)])
            for event in events
        ]
    )
    for event, deliveries in zip(events, per_event, strict=True):
        _remember_deliveries(event, deliveries)
    return events


def _remember_deliveries(event: Event, deliveries: list[Delivery]) -> None:
    # Spare the response a query: the deliveries were just made.
    event._prefetched_objects_cache = {"deliveries": deliveries}  # type: ignore[attr-defined]
