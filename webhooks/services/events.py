from __future__ import annotations

from typing import Any

from django.db import transaction

from core import counters
from deliveries.services.creation import deliveries_create_for_event
from webhooks.models import Endpoint, Event, Tenant


@transaction.atomic
def event_ingest(*, tenant: Tenant, event_type: str, data: dict[str, Any]) -> Event:
    """Record an event and one delivery per matching active endpoint, in one transaction.

    The first attempts are published only after commit (the outbox pattern): a crash
    before commit leaves nothing, a crash after leaves rows the scheduler will find.
    """
    event = Event.objects.create(tenant=tenant, type=event_type, data=data)
    endpoints = [
        endpoint
        for endpoint in Endpoint.objects.filter(tenant=tenant, is_active=True).only(
            "id", "event_types"
        )
        if endpoint.matches(event_type)
    ]
    deliveries = deliveries_create_for_event(event=event, endpoints=endpoints)
    transaction.on_commit(lambda: counters.increment("events"))  # homing_events_total
    # Spare the response a query: the deliveries were just made.
    event._prefetched_objects_cache = {"deliveries": deliveries}  # type: ignore[attr-defined]
    return event
