"""The per-process routing cache never routes to a deleted or deactivated endpoint.

These tests commit for real (`transactional_db`): the cache is used only outside a
transaction, where the ingest statement itself checks the routing version.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from deliveries.intake import routing
from deliveries.intake.ingest import event_ingest
from deliveries.models import Delivery
from tests.factories import endpoint_row
from webhooks.models import Endpoint, RoutingVersion

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _cold_cache():
    routing.routing_forget()
    yield
    routing.routing_forget()


def _routed(alice, event_type="order.paid"):
    event = event_ingest(tenant=alice.tenant, event_type=event_type, data={})
    return sorted(d.endpoint_id for d in Delivery.objects.filter(event_id=event.id))


def test_a_warm_cache_ingests_in_one_statement(alice):
    shop = endpoint_row(alice.tenant)
    assert _routed(alice) == [shop.id]
    with CaptureQueriesContext(connection) as queries:
        assert _routed(alice) == [shop.id]
    # The ingest statement, then the test's own read of the deliveries.
    assert len(queries) == 2


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda ep: ep.delete(), id="deleted"),
        # The worker's deactivation: a queryset update, no service involved.
        pytest.param(
            lambda ep: Endpoint.objects.filter(pk=ep.pk).update(is_active=False), id="deactivated"
        ),
        pytest.param(
            lambda ep: Endpoint.objects.filter(pk=ep.pk).update(event_types=["invoice.*"]),
            id="narrowed",
        ),
    ],
)
def test_an_endpoint_change_is_seen_by_the_next_event(alice, change):
    shop, audit = endpoint_row(alice.tenant), endpoint_row(alice.tenant)
    assert _routed(alice) == sorted([shop.id, audit.id])  # the cache is warm now
    change(shop)
    assert _routed(alice) == [audit.id]  # read back from the deliveries table


def test_a_new_endpoint_gets_the_next_event(alice):
    assert _routed(alice) == []
    shop = endpoint_row(alice.tenant)
    assert _routed(alice) == [shop.id]
    reactivated = endpoint_row(alice.tenant, is_active=False)
    assert _routed(alice) == [shop.id]
    Endpoint.objects.filter(pk=reactivated.pk).update(is_active=True)
    assert _routed(alice) == sorted([shop.id, reactivated.id])


def test_health_updates_keep_the_cache(alice):
    shop = endpoint_row(alice.tenant)
    _routed(alice)
    before = RoutingVersion.objects.get(tenant=alice.tenant).version
    Endpoint.objects.filter(pk=shop.pk).update(consecutive_failures=3, circuit_state="open")
    assert RoutingVersion.objects.get(tenant=alice.tenant).version == before


def test_a_rolled_back_change_never_passes_the_gate(alice):
    shop = endpoint_row(alice.tenant)
    _routed(alice)
    with pytest.raises(RuntimeError), transaction.atomic():
        Endpoint.objects.filter(pk=shop.pk).update(is_active=False)
        # Read inside the transaction: the cache now holds a version that never commits.
        assert _routed(alice) == []
        raise RuntimeError("rolled back")
    assert _routed(alice) == [shop.id]
    Endpoint.objects.filter(pk=shop.pk).update(is_active=False)
    assert _routed(alice) == []


def test_another_tenants_change_keeps_alices_cache(alice, bob):
    shop = endpoint_row(alice.tenant)
    _routed(alice)
    endpoint_row(bob.tenant)
    with CaptureQueriesContext(connection) as queries:
        assert _routed(alice) == [shop.id]
    assert len(queries) == 2


def test_an_endpoint_deleted_after_the_gate_counts_as_a_routing_change(alice):
    # The deferred foreign key finds it at commit; checked at once here to see the error.
    event = event_ingest(tenant=alice.tenant, event_type="a.b", data={})
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with pytest.raises(IntegrityError) as gone_endpoint, transaction.atomic():
        Delivery.objects.create(
            tenant=alice.tenant,
            event_id=event.id,
            endpoint_id="ep_gone",
            next_attempt_at=event.created_at,
            sequence=1,
        )
    assert routing.routing_changed(gone_endpoint.value)
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    endpoint = Endpoint.objects.get(tenant=alice.tenant)
    # (A delivery's event is no foreign key since history is partitioned: a missing
    # tenant is the other fault here.)
    with pytest.raises(IntegrityError) as gone_tenant, transaction.atomic():
        Delivery.objects.create(
            tenant_id="ten_gone", event_id=event.id, endpoint=endpoint,
            next_attempt_at=event.created_at, sequence=1,
        )  # fmt: skip
    assert not routing.routing_changed(gone_tenant.value)  # another fault: not retried


def test_routing_that_keeps_changing_is_a_json_503(alice, monkeypatch):
    def changing(**kwargs):
        raise routing.RoutingChanged("the endpoints kept changing; nothing was written")

    monkeypatch.setattr("deliveries.intake.api.events_ingest", changing)
    answer = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    assert answer.status_code == 503
    assert answer.json() == {"message": "the endpoints kept changing; nothing was written"}
