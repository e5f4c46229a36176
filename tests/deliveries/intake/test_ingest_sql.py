"""Intake's statements are written once, whole (deliveries/intake/ingest_sql.py): what runs
is exactly that text, and the text is pinned here (by its digest), so a change to how every
event comes in is made on purpose."""

from __future__ import annotations

import contextlib
import hashlib
import re

import pytest
from django.db import transaction

from deliveries.intake import ingest_sql, routing
from deliveries.intake.ingest import event_ingest, events_ingest
from deliveries.intake.sequences import sequences_take
from deliveries.models import Delivery, SequenceCounter
from tests.databases import postgresql_only, statements_run
from tests.factories import endpoint_row
from webhooks.models import Endpoint, Event, RoutingVersion
from webhooks.services.event_input import EventInput

# The SHA-256 of each statement's text: whoever changes a statement reads it whole again
# (and the comment above it) and updates this.
PINNED = {
    "ROUTING": "c564e5da92bfa60fc08a3e296ab4e0cabac1be76720572ee781f11702c1b8353",
    "INGEST_GATED": "50836fb02d92204a5eabcd1a0ceec924a7f0ed0f277c6d400c9275dd6bf924f2",
    "INGEST_GATED_EVENTS_ONLY": "4a2ad43a03b1f4cce7b76ce7b5213f003fdbb39fd0a8038d72aa337dc360ef82",
    "INGEST_UNGATED": "ad6a9f42b500ba52702b75034efa60b045de9816dec22dfe4d9ebc2a2731f428",
    "INGEST_UNGATED_EVENTS_ONLY": (
        "28776d583a1aefb2050db9dffe0829545b5c16322304ed698ffd12a952a95ff5"
    ),
    "SEQUENCES_TAKE": "913f21343d86ef05dfd49d7b6f5e85c4da1b4a18add8dfa8337ed6c1ce0e55c1",
}

TABLES = {
    "webhooks_routingversion": RoutingVersion,
    "webhooks_endpoint": Endpoint,
    "webhooks_event": Event,
    "deliveries_sequencecounter": SequenceCounter,
    "deliveries_delivery": Delivery,
}


def _flat(sql: str) -> str:
    return " ".join(sql.split())


def test_the_statements_are_the_pinned_text() -> None:
    assert set(PINNED) == {name for name in dir(ingest_sql) if name.isupper()}
    for name, digest in PINNED.items():
        text = getattr(ingest_sql, name)
        assert hashlib.sha256(text.encode()).hexdigest() == digest, f"{name} changed:\n{text}"


def test_the_statements_name_the_tables_the_models_use() -> None:
    for table, model in TABLES.items():
        assert model._meta.db_table == table
    for name in PINNED:
        named = re.findall(r"\b((?:webhooks|deliveries)_[a-z]+)\b", getattr(ingest_sql, name))
        assert named and set(named) <= set(TABLES), (name, named)


def test_the_inserts_fill_every_column_of_an_event_and_a_delivery() -> None:
    # A column added to Event or Delivery must be added to the inserts too (or given a
    # database default): otherwise ingestion would fail, or store a wrong value.
    for model in (Event, Delivery):
        table = model._meta.db_table
        for name in PINNED:
            found = re.search(rf"INSERT INTO {table} \(([^)]*)\)", getattr(ingest_sql, name))
            if found:
                columns = {c.strip() for c in found.group(1).split(",")}
                assert columns == {f.column for f in model._meta.concrete_fields}, name


def test_the_variants_differ_only_in_the_gate_and_the_deliveries() -> None:
    checked = _flat("""
        SELECT %(tenant_id)s::text WHERE COALESCE(
            (SELECT version FROM webhooks_routingversion WHERE tenant_id = %(tenant_id)s), 0
        ) = %(version)s
    """)
    unchecked = "SELECT %(tenant_id)s::text"
    gated, ungated = _flat(ingest_sql.INGEST_GATED), _flat(ingest_sql.INGEST_UNGATED)
    assert gated.count(checked) == 1
    assert gated.replace(checked, unchecked) == ungated
    # The events-only variants: the gate and new_events' INSERT, nothing after.
    for full, events_only in (
        (gated, ingest_sql.INGEST_GATED_EVENTS_ONLY),
        (ungated, ingest_sql.INGEST_UNGATED_EVENTS_ONLY),
    ):
        gate, rest = full.split(" ), new_events AS ( ", 1)
        events_insert = rest.split(" RETURNING id ), new_rows AS (", 1)[0]
        assert _flat(events_only) == f"{gate} ) {events_insert}"


def test_both_reservations_of_sequence_numbers_lock_in_the_same_order() -> None:
    upsert = _flat(ingest_sql.INGEST_GATED).split(" sequences AS ( ", 1)[1]
    upsert = upsert.split(" ), new_deliveries AS (", 1)[0]
    assert "GROUP BY endpoint_id ORDER BY endpoint_id" in upsert
    take = upsert.replace(
        "FROM new_rows", "FROM unnest(%(endpoint_ids)s::text[]) AS c(endpoint_id)"
    )
    assert _flat(ingest_sql.SEQUENCES_TAKE) == take


def _nothing() -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_an_ingestion_outside_a_transaction_runs_the_gated_statement(alice) -> None:
    routing.routing_forget()
    shop, crm = endpoint_row(alice.tenant), endpoint_row(alice.tenant)
    event_ingest(tenant=alice.tenant, event_type="a.b", data={"n": 0})  # warms the cache
    with statements_run() as ran:
        events = events_ingest(
            tenant=alice.tenant,
            inputs=[EventInput(type="a.b", data={"n": n}, ordering_key=None) for n in (1, 2)],
        )
    assert ran == [ingest_sql.INGEST_GATED]
    # What the statement wrote: the events' data in order, each endpoint's numbers 2 and 3.
    assert [Event.objects.get(pk=e.id).data for e in events] == [{"n": 1}, {"n": 2}]
    numbered = Delivery.objects.filter(event_id__in=[e.id for e in events])
    assert sorted(numbered.values_list("endpoint_id", "sequence")) == sorted(
        [(shop.id, 2), (shop.id, 3), (crm.id, 2), (crm.id, 3)]
    )
    assert {d.sequence for e in events for d in e.deliveries} == {2, 3}
    with statements_run() as ran:
        event_ingest(tenant=alice.tenant, event_type="x.y", data={})
    assert ran == [ingest_sql.INGEST_GATED]
    routing.routing_forget()


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_the_one_statement_keeps_each_events_trace_context(alice) -> None:
    routing.routing_forget()
    endpoint_row(alice.tenant)
    traced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nvendor=abc"
    inputs = [
        EventInput(type="a.b", data={}, trace_context=traced),
        EventInput(type="a.b", data={}),
    ]
    for in_transaction in (False, True):
        with (
            statements_run() as ran,
            transaction.atomic(durable=False) if in_transaction else _nothing(),
        ):
            events = events_ingest(tenant=alice.tenant, inputs=inputs)
        assert ran[-1] in (ingest_sql.INGEST_GATED, ingest_sql.INGEST_UNGATED)
        kept = [Event.objects.get(pk=e.id).trace_context for e in events]
        assert kept == [traced, None]
    routing.routing_forget()


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_an_event_no_endpoint_takes_runs_the_events_only_statement(alice) -> None:
    routing.routing_forget()
    endpoint_row(alice.tenant, event_types=["order.*"])
    with statements_run() as ran:
        event = event_ingest(tenant=alice.tenant, event_type="invoice.paid", data={})
    assert ran == [ingest_sql.ROUTING, ingest_sql.INGEST_GATED_EVENTS_ONLY]
    assert Event.objects.filter(pk=event.id, tenant=alice.tenant).exists()
    assert event.deliveries == []
    routing.routing_forget()


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_an_ingestion_inside_a_transaction_runs_the_ungated_statement(alice) -> None:
    shop = endpoint_row(alice.tenant, event_types=["order.*"])
    with statements_run() as ran, transaction.atomic():
        paid = event_ingest(tenant=alice.tenant, event_type="order.paid", data={})
        sent = event_ingest(tenant=alice.tenant, event_type="invoice.sent", data={})
    assert ran == [
        ingest_sql.ROUTING,
        ingest_sql.INGEST_UNGATED,
        ingest_sql.ROUTING,
        ingest_sql.INGEST_UNGATED_EVENTS_ONLY,
    ]
    assert [(d.endpoint_id, d.sequence) for d in paid.deliveries] == [(shop.id, 1)]
    assert sent.deliveries == []
    assert Delivery.objects.get(event_id=paid.id).status == Delivery.Status.PENDING


@postgresql_only
def test_the_orm_path_reserves_numbers_with_sequences_take(alice) -> None:
    shop, crm = endpoint_row(alice.tenant), endpoint_row(alice.tenant)
    with statements_run() as ran:
        numbers = sequences_take([crm.id, shop.id, crm.id])
    assert ran == [ingest_sql.SEQUENCES_TAKE]
    assert numbers == [1, 1, 2]
    assert sequences_take([shop.id]) == [2]
