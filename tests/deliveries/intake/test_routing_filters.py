"""Filters at ingestion: an endpoint whose filter does not match gets no delivery and no
sequence number, on the one-statement path (cached routing) and the ORM path alike."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deliveries.intake import routing
from deliveries.intake.ingest import event_ingest, events_ingest
from deliveries.models import Delivery
from tests.factories import endpoint_row
from webhooks.models import Endpoint, RoutingVersion
from webhooks.services.endpoint_filters import filter_sealed
from webhooks.services.event_input import EventInput

pytestmark = pytest.mark.django_db(transaction=True)

BIG = {"data": {"amount": {"$gte": 100}}}


@pytest.fixture(autouse=True)
def _cold_cache():
    routing.routing_forget()
    yield
    routing.routing_forget()


def _sequences(endpoint):
    return list(
        Delivery.objects.filter(endpoint=endpoint)
        .order_by("sequence")
        .values_list("sequence", "event__data__amount")
    )


@pytest.mark.parametrize("ordering_key", [None, "cus_1"], ids=["one-statement", "orm"])
def test_an_unmatched_endpoint_gets_no_delivery_and_no_sequence(alice, ordering_key):
    big, every = endpoint_row(alice.tenant, filter=BIG), endpoint_row(alice.tenant)
    amounts = [50, 150, 99, 100, 3000, 1]
    events_ingest(
        tenant=alice.tenant,
        inputs=[
            EventInput(type="order.paid", data={"amount": n}, ordering_key=ordering_key)
            for n in amounts
        ],
    )
    assert _sequences(big) == [(1, 150), (2, 100), (3, 3000)]  # gapless, in order
    assert [n for _, n in _sequences(every)] == amounts


def test_event_types_and_filter_must_both_match(alice):
    shop = endpoint_row(alice.tenant, event_types=["order.*"], filter=BIG)
    for event_type, amount in [("order.paid", 500), ("invoice.paid", 500), ("order.paid", 5)]:
        event_ingest(tenant=alice.tenant, event_type=event_type, data={"amount": amount})
    assert _sequences(shop) == [(1, 500)]


def test_a_filter_sees_the_type_and_the_ordering_key(alice):
    keyed = endpoint_row(
        alice.tenant, filter={"type": {"$endsWith": ".paid"}, "ordering_key": {"$neq": None}}
    )
    event_ingest(tenant=alice.tenant, event_type="order.paid", data={"amount": 1})
    event_ingest(tenant=alice.tenant, event_type="order.sent", data={"amount": 2}, ordering_key="k")
    event_ingest(tenant=alice.tenant, event_type="order.paid", data={"amount": 3}, ordering_key="k")
    assert _sequences(keyed) == [(1, 3)]


def test_a_changed_filter_is_seen_by_the_next_event(alice):
    shop = endpoint_row(alice.tenant, filter=BIG)
    event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 5})  # cache warm
    before = RoutingVersion.objects.get(tenant=alice.tenant).version
    Endpoint.objects.filter(pk=shop.pk).update(
        filter=filter_sealed({"data": {"amount": {"$lt": 100}}})
    )
    assert RoutingVersion.objects.get(tenant=alice.tenant).version != before
    event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 6})
    Endpoint.objects.filter(pk=shop.pk).update(filter="")
    event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 700})
    assert _sequences(shop) == [(1, 6), (2, 700)]


def test_a_warm_cache_with_filters_still_ingests_in_one_statement(alice):
    endpoint_row(alice.tenant, filter=BIG)
    event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 500})
    with CaptureQueriesContext(connection) as queries:
        event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 500})
        event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 5})
    assert len(queries) == 2


def test_a_filter_is_compiled_once_and_shared_by_equal_filters(alice, bob):
    first, second = endpoint_row(alice.tenant, filter=BIG), endpoint_row(bob.tenant, filter=BIG)
    event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 500})
    event_ingest(tenant=bob.tenant, event_type="a.b", data={"amount": 500})
    alices = routing.routing_cached(tenant_id=alice.tenant.pk)
    bobs = routing.routing_cached(tenant_id=bob.tenant.pk)
    assert alices is not None and bobs is not None
    assert alices.filters[first.pk] is bobs.filters[second.pk]


def test_a_stored_filter_that_does_not_compile_takes_nothing(alice):
    # Written around the API's check: routing must neither fail nor let everything through.
    shop, every = endpoint_row(alice.tenant), endpoint_row(alice.tenant)
    Endpoint.objects.filter(pk=shop.pk).update(filter=filter_sealed({"data": {"a": {"$bogus": 1}}}))
    event = event_ingest(tenant=alice.tenant, event_type="a.b", data={"a": 1})
    assert [d.endpoint_id for d in event.deliveries] == [every.pk]


def test_a_stored_filter_no_key_decrypts_takes_nothing(alice, settings):
    # HOMING_ENCRYPTION_KEY lost the key it was sealed with: neither fail nor let all in.
    endpoint_row(alice.tenant, filter=BIG)
    every = endpoint_row(alice.tenant)
    settings.HOMING_ENCRYPTION_KEY = [Fernet.generate_key().decode()]
    event = event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 500})
    assert [d.endpoint_id for d in event.deliveries] == [every.pk]


def test_routing_decrypts_a_filter_once_not_per_event(alice, monkeypatch):
    endpoint_row(alice.tenant, filter=BIG)
    opened = []

    def filter_opened(stored):
        opened.append(stored)
        return BIG

    monkeypatch.setattr(routing, "filter_opened", filter_opened)
    for amount in (5, 500, 50, 5000):
        event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": amount})
    endpoint_row(alice.tenant)  # another endpoint: the routing is read again
    event_ingest(tenant=alice.tenant, event_type="a.b", data={"amount": 1})
    assert len(opened) == 1
