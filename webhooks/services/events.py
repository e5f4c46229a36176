"""Ingestion: an event (or a batch of them) and its deliveries, all or nothing.

The outbox pattern: rows are committed before the 202, and the first attempts are
published only after commit; a crash before commit leaves nothing, a crash after leaves
rows the scheduler finds.

On PostgreSQL the write is one statement (a data-modifying CTE inserting the events and
the deliveries), so outside a transaction it needs no BEGIN/COMMIT round trips: with the
endpoint lookup before it, an event costs two round trips and no ORM query building,
which was most of the web process's CPU per event. Other databases take the ORM path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.db import connection, models, transaction
from django.utils import timezone

from core import counters
from core.sql import insert_statement
from deliveries.queue import publish_deliveries_on_commit
from deliveries.services.creation import (
    deliveries_build,
    deliveries_create_for_events,
    deliveries_insert_statement,
)
from webhooks.models import Endpoint, Event, Tenant
from webhooks.services.event_input import EventInput


def event_ingest(*, tenant: Tenant, event_type: str, data: dict[str, Any]) -> Event:
    """Record an event and one delivery per matching active endpoint."""
    return events_ingest(tenant=tenant, inputs=[EventInput(type=event_type, data=data)])[0]


def events_ingest(
    *, tenant: Tenant, inputs: Sequence[EventInput], exclude_endpoint_id: str | None = None
) -> list[Event]:
    """Record events (all or nothing) and their deliveries; one wake-up for them all.

    Each returned event carries its deliveries (`event.deliveries.all()` is served from
    memory), in the order of `inputs`. `exclude_endpoint_id`: an operational event is
    never delivered to the endpoint it is about.
    """
    if connection.vendor == "postgresql":
        events = _ingest_in_one_statement(
            tenant=tenant, inputs=inputs, exclude_endpoint_id=exclude_endpoint_id
        )
    else:
        events = _ingest_with_the_orm(
            tenant=tenant, inputs=inputs, exclude_endpoint_id=exclude_endpoint_id
        )
    # homing_events_total; at once outside a transaction, else when it commits.
    transaction.on_commit(lambda: counters.increment("events", len(events)))
    return events


def _ingest_in_one_statement(
    *, tenant: Tenant, inputs: Sequence[EventInput], exclude_endpoint_id: str | None = None
) -> list[Event]:
    endpoints = [e for e in _active_endpoints(tenant) if e.pk != exclude_endpoint_id]
    now = timezone.now()
    events = [
        Event(tenant=tenant, type=item.type, data=item.data, created_at=now) for item in inputs
    ]
    per_event = deliveries_build(
        fan_out=[(event, [e for e in endpoints if e.matches(event.type)]) for event in events],
        now=now,
    )
    every = []
    for event, deliveries in zip(events, per_event, strict=True):
        _remember_deliveries(event, deliveries)
        every += deliveries
    event_insert, event_params = insert_statement(Event, events)
    if every:
        delivery_insert, delivery_params = deliveries_insert_statement(every)
        # FKs are DEFERRABLE INITIALLY DEFERRED: checked at commit, when both are in.
        sql = f"WITH new_events AS ({event_insert}) {delivery_insert}"
        params = event_params + delivery_params
    else:
        sql, params = event_insert, event_params
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    # Outside a transaction the statement has committed: this publishes at once.
    publish_deliveries_on_commit([delivery.id for delivery in every])
    return events


def _active_endpoints(tenant: Tenant) -> list[Endpoint]:
    table = Endpoint._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            # The table name is the model's, never input.
            f"SELECT id, event_types FROM {table} WHERE tenant_id = %s AND is_active",  # noqa: S608
            [tenant.pk],
        )
        rows = cursor.fetchall()
    return [
        Endpoint(id=pk, event_types=json.loads(types) if isinstance(types, str) else types)
        for pk, types in rows
    ]


@transaction.atomic
def _ingest_with_the_orm(
    *, tenant: Tenant, inputs: Sequence[EventInput], exclude_endpoint_id: str | None = None
) -> list[Event]:
    events = [Event(tenant=tenant, type=item.type, data=item.data) for item in inputs]
    Event.objects.bulk_create(events)
    endpoints = list(
        Endpoint.objects.filter(tenant=tenant, is_active=True)
        .exclude(pk=exclude_endpoint_id)
        .only("id", "event_types")
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


def _remember_deliveries(event: Event, deliveries: list[models.Model]) -> None:
    # Spare the response a query: the deliveries were just made.
    event._prefetched_objects_cache = {"deliveries": deliveries}  # type: ignore[attr-defined]
