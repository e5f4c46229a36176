"""Ingestion: an event (or a batch of them) and its deliveries, all or nothing.

The outbox pattern: rows are committed before the 202, and the first attempts are
published only after commit; a crash before commit leaves nothing, a crash after leaves
rows the scheduler finds.

On PostgreSQL the write is one statement (a data-modifying CTE inserting the events and
the deliveries), so outside a transaction it needs no BEGIN/COMMIT round trips, and the
endpoints come from a per-process routing cache that the statement itself checks
(routing.py): an event costs one round trip and no ORM query building, which was most of
the web process's CPU per event. Other databases take the ORM path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction

from core import counters
from core.clock import database_now
from core.ids import new_id
from core.postgresql.prepared import prepared_cursor, text_array
from deliveries.intake.backpressure import work_admit, work_admitted
from deliveries.intake.creation import (
    NewDelivery,
    deliveries_build,
    deliveries_create_for_event,
    deliveries_create_for_events,
    deliveries_numbered,
)
from deliveries.intake.ingest_sql import (
    INGEST_GATED,
    INGEST_GATED_EVENTS_ONLY,
    INGEST_UNGATED,
    INGEST_UNGATED_EVENTS_ONLY,
)
from deliveries.intake.routing import (
    Routing,
    RoutingChanged,
    endpoints_filtered,
    filter_predicate,
    routing_cached,
    routing_changed,
    routing_load,
)
from deliveries.models import Delivery
from deliveries.wakeups import publish_deliveries_on_commit
from webhooks.models import Endpoint, Event, Tenant
from webhooks.services.endpoints import TEST_EVENT_TYPE, EndpointInactive
from webhooks.services.event_input import EventInput

# Reads of a tenant's routing before an ingestion gives up: each retry means an endpoint
# of the tenant changed in the last few milliseconds, so a third one is already unusual.
ROUTING_TRIES = 5

# The one statement, by (gated, with deliveries): ingest_sql.py says why four variants.
INGEST = {
    (True, True): INGEST_GATED,
    (True, False): INGEST_GATED_EVENTS_ONLY,
    (False, True): INGEST_UNGATED,
    (False, False): INGEST_UNGATED_EVENTS_ONLY,
}


@dataclass(frozen=True, slots=True)
class IngestedEvent:
    """An event as it was recorded, with its deliveries (what the 202 answers)."""

    id: str
    type: str
    data: dict[str, Any]
    created_at: datetime
    deliveries: list[NewDelivery]
    ordering_key: str | None = None


def event_ingest(
    *, tenant: Tenant, event_type: str, data: dict[str, Any], ordering_key: str | None = None
) -> IngestedEvent:
    """Record an event and one delivery per matching active endpoint."""
    item = EventInput(type=event_type, data=data, ordering_key=ordering_key)
    return events_ingest(tenant=tenant, inputs=[item])[0]


def events_ingest(
    *, tenant: Tenant, inputs: Sequence[EventInput], exclude_endpoint_id: str | None = None
) -> list[IngestedEvent]:
    """Record events (all or nothing) and their deliveries; one wake-up for them all.

    The events come back in the order of `inputs`. `exclude_endpoint_id`: an operational
    event is never delivered to the endpoint it is about.
    """
    # Events with an ordering key take the ORM path: their deliveries join their key's
    # line, which must be read after the sequence counters are locked (ordering.py),
    # so not in the one statement (whose snapshot is taken before it waits for them).
    keyed = any(item.ordering_key is not None for item in inputs)
    db = connections[DEFAULT_DB_ALIAS]  # once: each read through `connection` looks it up
    if db.vendor == "postgresql" and not keyed:
        events = _ingest_in_one_statement(
            tenant=tenant,
            inputs=inputs,
            exclude_endpoint_id=exclude_endpoint_id,
            in_transaction=db.in_atomic_block,
        )
    else:
        events = _ingest_with_the_orm(
            tenant=tenant, inputs=inputs, exclude_endpoint_id=exclude_endpoint_id
        )
    # homing_events_total; at once outside a transaction, else when it commits.
    db.on_commit(lambda: counters.increment_soon("events", len(events)))
    return events


def _ingest_in_one_statement(
    *,
    tenant: Tenant,
    inputs: Sequence[EventInput],
    exclude_endpoint_id: str | None,
    in_transaction: bool,
) -> list[IngestedEvent]:
    # Outside a transaction the routing may come from this process's cache: the statement
    # itself checks it is current (routing.py). Inside one, a failed statement would
    # abort the caller's transaction, so the routing is read afresh instead.
    routing = None if in_transaction else routing_cached(tenant_id=tenant.pk)
    for _ in range(ROUTING_TRIES):
        if routing is None:
            routing = routing_load(tenant_id=tenant.pk)
        try:
            return _insert_routed(
                tenant=tenant,
                inputs=inputs,
                routing=routing,
                gated=not in_transaction,
                exclude_endpoint_id=exclude_endpoint_id,
            )
        except IntegrityError as exc:
            if not routing_changed(exc):
                raise
            routing = None  # an endpoint changed since it was cached: read it again
    raise RoutingChanged(f"the endpoints of {tenant.pk} kept changing; nothing was written")


def _insert_routed(
    *,
    tenant: Tenant,
    inputs: Sequence[EventInput],
    routing: Routing,
    gated: bool,
    exclude_endpoint_id: str | None,
) -> list[IngestedEvent]:
    now = database_now()
    event_ids = [new_id("evt") for _ in inputs]
    per_event = deliveries_build(
        fan_out=[
            (event_id, routing.routed(item, exclude=exclude_endpoint_id))
            for event_id, item in zip(event_ids, inputs, strict=True)
        ]
    )
    every = [delivery for deliveries in per_event for delivery in deliveries]
    # Names and values are the statements' own (ingest_sql.py says what each part does).
    params = {
        "tenant_id": tenant.pk,
        "version": routing.version,
        "now": now,
        # One jsonb array for every event's data: one json.dumps, not one per event.
        "data": Event._meta.get_field("data").get_db_prep_save(
            [item.data for item in inputs], connection
        ),
        "event_ids": text_array(event_ids),
        "types": text_array([item.type for item in inputs]),
        "trace_contexts": text_array([item.trace_context or "" for item in inputs]),
        "delivery_ids": text_array([d.id for d in every]),
        "delivery_event_ids": text_array([d.event_id for d in every]),
        "endpoint_ids": text_array([d.endpoint_id for d in every]),
    }
    sql = INGEST[gated, bool(every)]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        if every:
            per_event = deliveries_numbered(per_event, dict(cursor.fetchall()))
    # Outside a transaction the statement has committed: this publishes at once.
    publish_deliveries_on_commit([delivery.id for delivery in every])
    return [
        IngestedEvent(event_id, item.type, item.data, now, deliveries)
        for event_id, item, deliveries in zip(event_ids, inputs, per_event, strict=True)
    ]


@transaction.atomic
def _ingest_with_the_orm(
    *, tenant: Tenant, inputs: Sequence[EventInput], exclude_endpoint_id: str | None = None
) -> list[IngestedEvent]:
    events = [
        Event(
            tenant=tenant,
            type=item.type,
            data=item.data,
            ordering_key=item.ordering_key,
            trace_context=item.trace_context,
        )
        for item in inputs
    ]
    Event.objects.bulk_create(events)
    endpoints = list(
        Endpoint.objects.filter(tenant=tenant, is_active=True)
        .exclude(pk=exclude_endpoint_id)
        .only("id", "event_types", "filter")
    )
    filters = {e.pk: match for e in endpoints if (match := filter_predicate(e.filter)) is not None}
    per_event = deliveries_create_for_events(
        fan_out=[
            (
                event,
                endpoints_filtered(
                    [endpoint for endpoint in endpoints if endpoint.matches(event.type)],
                    filters,
                    item,
                ),
            )
            for event, item in zip(events, inputs, strict=True)
        ]
    )
    return [
        IngestedEvent(
            event.id,
            event.type,
            event.data,
            event.created_at,
            [
                NewDelivery(d.id, event.id, d.endpoint_id, sequence=d.sequence, status=d.status)
                for d in deliveries
            ],
            event.ordering_key,
        )
        for event, deliveries in zip(events, per_event, strict=True)
    ]


@transaction.atomic
def endpoint_send_test(
    *, endpoint: Endpoint, event_type: str = TEST_EVENT_TYPE, data: dict[str, Any] | None = None
) -> tuple[Event, Delivery]:
    """A test event delivered to this endpoint only, whatever its event_types and filter:
    `homing.test` (data `{"test": true}`) checks a new endpoint's URL and signature
    verification end to end; a catalog type with its example (the portal's "send an
    example") shows a receiver what that type looks like."""
    if not endpoint.is_active:
        raise EndpointInactive("The endpoint is deactivated; activate it to send a test event.")
    work_admit(tenant_id=endpoint.tenant_id)  # or 429, before anything is written
    event = Event.objects.create(
        tenant_id=endpoint.tenant_id,
        type=event_type,
        data={"test": True} if data is None else data,
    )
    [delivery] = deliveries_create_for_event(event=event, endpoints=[endpoint])
    work_admitted(tenant_id=endpoint.tenant_id, deliveries=1)
    return event, delivery
