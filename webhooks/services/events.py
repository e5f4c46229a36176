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
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from core import counters
from core.ids import new_id
from deliveries.queue import publish_deliveries_on_commit
from deliveries.services.creation import (
    deliveries_build,
    deliveries_create_for_events,
    deliveries_insert_statement,
)
from webhooks.models import Endpoint, Event, Tenant
from webhooks.services.event_input import EventInput
from webhooks.services.routing import (
    Routing,
    RoutingChanged,
    gated_tenant_sql,
    routing_cached,
    routing_changed,
    routing_load,
)

# Reads of a tenant's routing before an ingestion gives up: each retry means an endpoint
# of the tenant changed in the last few milliseconds, so a third one is already unusual.
ROUTING_TRIES = 5


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
    # Outside a transaction the routing may come from this process's cache: the statement
    # itself checks it is current (routing.py). Inside one, a failed statement would
    # abort the caller's transaction, so the routing is read afresh instead.
    in_transaction = connection.in_atomic_block
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
) -> list[Event]:
    now = timezone.now()
    events = [
        Event(id=new_id("evt"), tenant=tenant, type=item.type, data=item.data, created_at=now)
        for item in inputs
    ]
    per_event = deliveries_build(
        fan_out=[(e, routing.targets(e.type, exclude=exclude_endpoint_id)) for e in events],
        now=now,
    )
    every = []
    for event, deliveries in zip(events, per_event, strict=True):
        _remember_deliveries(event, deliveries)
        every += deliveries
    if gated:
        gate, gate_params = gated_tenant_sql(tenant_id=tenant.pk, version=routing.version)
    else:
        gate, gate_params = "SELECT %s::text", [tenant.pk]
    # Every event's tenant_id is read from `gate`: NULL there fails the whole statement.
    event_insert, event_params = _events_insert(events)
    sql, params = f"WITH gate AS MATERIALIZED ({gate}) ", gate_params + event_params
    if every:
        delivery_insert, delivery_params = deliveries_insert_statement(every)
        # FKs are DEFERRABLE INITIALLY DEFERRED: checked at commit, when both are in.
        sql += f", new_events AS ({event_insert}) {delivery_insert}"
        params += delivery_params
    else:
        sql += event_insert
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    # Outside a transaction the statement has committed: this publishes at once.
    publish_deliveries_on_commit([delivery.id for delivery in every])
    return events


EVENT_COLUMNS = ("id", "tenant_id", "type", "data", "created_at")  # every Event column


def _events_insert(events: Sequence[Event]) -> tuple[str, list[Any]]:
    """The INSERT of the events with a fixed number of parameters however many they are:
    the statement text is the same for 1 or 1,000 events (psycopg caches its parse), and
    no value goes through the model's fields one by one. The `data` of all events is one
    jsonb array (one json.dumps), the ids and types are text arrays, and the events of one
    call share their created_at. Each row's tenant_id comes from the statement's `gate`."""
    data = Event._meta.get_field("data").get_db_prep_save([e.data for e in events], connection)
    table = Event._meta.db_table  # names from the model, values all bound: no input in SQL
    sql = (
        f"INSERT INTO {table} ({', '.join(EVENT_COLUMNS)}) "  # noqa: S608
        "SELECT e.id, (SELECT * FROM gate), e.type, (%s::jsonb) -> (e.n::int - 1), %s "
        "FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS e(id, type, n)"
    )
    return sql, [data, events[0].created_at, [e.id for e in events], [e.type for e in events]]


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
