"""The ingestion service: one write path per database, the same rows either way."""

from __future__ import annotations

import pytest

from deliveries.intake import ingest as events_service
from deliveries.models import Delivery
from tests.factories import endpoint_row
from webhooks.models import Event
from webhooks.services.event_input import EventInput

INPUTS = [EventInput("order.paid", {"n": 1}), EventInput("invoice.sent", {"é": "ü"})]


@pytest.fixture
def endpoints(alice, bob):
    return {
        "all": endpoint_row(alice.tenant),
        "orders": endpoint_row(alice.tenant, event_types=["order.*"]),
        "inactive": endpoint_row(alice.tenant, is_active=False),
        "bobs": endpoint_row(bob.tenant),
    }


def deliveries(event):
    """What ingestion returned, or what the database holds."""
    if isinstance(event, Event):
        return event.deliveries.all()
    return event.deliveries


def fan_out(events):
    return [(e.type, e.data, sorted(d.endpoint_id for d in deliveries(e))) for e in events]


@pytest.mark.parametrize(
    "ingest", [events_service.events_ingest, events_service._ingest_with_the_orm]
)
def test_both_write_paths_store_the_same_fan_out(alice, endpoints, ingest):
    made = ingest(tenant=alice.tenant, inputs=INPUTS)
    expected = [
        ("order.paid", {"n": 1}, sorted([endpoints["all"].id, endpoints["orders"].id])),
        ("invoice.sent", {"é": "ü"}, [endpoints["all"].id]),
    ]
    assert fan_out(made) == expected
    stored = [Event.objects.prefetch_related("deliveries").get(pk=e.id) for e in made]
    assert fan_out(stored) == expected
    assert [e.created_at for e in stored] == [e.created_at for e in made]
    rows = Delivery.objects.all()
    assert {r.status for r in rows} == {"pending"} and all(r.next_attempt_at for r in rows)
    assert {r.tenant_id for r in rows} == {alice.tenant.id}


def test_a_batch_is_one_wake_up(alice, endpoints, monkeypatch):
    published: list[list[str]] = []
    monkeypatch.setattr(events_service, "publish_deliveries_on_commit", published.append)
    made = events_service.events_ingest(tenant=alice.tenant, inputs=INPUTS * 50)
    assert len(published) == 1
    assert sorted(published[0]) == sorted(d.id for e in made for d in e.deliveries)
    assert len(published[0]) == 150


def test_each_event_of_a_batch_keeps_its_own_type_and_data(alice, endpoints):
    inputs = [EventInput(f"order.n{n}", {"n": n, "text": 'it\'s \\ "quoted" é'}) for n in range(60)]
    made = events_service.events_ingest(tenant=alice.tenant, inputs=inputs)
    stored = {e.id: (e.type, e.data) for e in Event.objects.filter(tenant=alice.tenant)}
    assert [stored[e.id] for e in made] == [(i.type, i.data) for i in inputs]
    assert len({e.created_at for e in Event.objects.all()}) == 1
