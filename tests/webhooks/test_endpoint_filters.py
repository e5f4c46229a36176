"""`filter` on an endpoint through the API, and POST /endpoints/{id}/filter-test: what a
tenant (alice), her customer carol (a consumer key) and another tenant (bob) get."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from core import crypto
from deliveries.intake import routing
from deliveries.intake.ingest import event_ingest
from deliveries.models import Delivery
from tests.factories import consumer_key_via_api
from tests.migrations import latest, migrate
from webhooks.models import Endpoint, RoutingVersion, Tenant
from webhooks.services.endpoint_filters import endpoint_filter

URL = "http://127.0.0.1:9/hooks"
BIG = {"data": {"amount": {"$gte": 100}}}


def _create(actor, **fields):
    response = actor.client.post("/api/v1/endpoints", {"url": URL, **fields}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _consumer(actor, owner):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {consumer_key_via_api(actor, owner)}")
    return client


def _post_event(actor, data, event_type="order.paid"):
    response = actor.client.post(
        "/api/v1/events", {"type": event_type, "data": data}, format="json"
    )
    assert response.status_code == 202, response.content
    return response.json()


def test_a_filter_is_saved_shown_and_routes_events(alice):
    big = _create(alice, filter=BIG)
    assert big["filter"] == BIG
    assert alice.client.get(f"/api/v1/endpoints/{big['id']}").json()["filter"] == BIG
    small = _post_event(alice, {"amount": 5})
    large = _post_event(alice, {"amount": 500})
    assert small["deliveries"] == []
    assert [(d["endpoint_id"], d["sequence"]) for d in large["deliveries"]] == [(big["id"], 1)]


def test_an_endpoint_without_a_filter_shows_null(alice):
    assert _create(alice)["filter"] is None


@pytest.mark.parametrize(
    ("bad", "path", "says"),
    [
        ({"data": {"amount": {"$gte": True}}}, "filter.data.amount.$gte", "expected a number"),
        ({"data": {"a": {"$regex": "x"}}}, "filter.data.a.$regex", "unknown operator"),
        ({"customer": "x"}, "filter.customer", "unknown field"),
        ({"$or": []}, "filter.$or", "non-empty list"),
        (["type"], "filter", "expected an object"),
        ({"data": {"n": {"$in": ["x" * 100] * 50}}}, "filter", "4096 bytes"),
    ],
)
def test_an_invalid_filter_is_a_400_naming_its_path(alice, bad, path, says):
    response = alice.client.post("/api/v1/endpoints", {"url": URL, "filter": bad}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert path in body["errors"] and says in body["errors"][path][0]
    assert f"{path}:" in body["message"]


def test_a_filter_is_changed_and_removed_by_patch(alice):
    endpoint = _create(alice, filter=BIG)
    url = f"/api/v1/endpoints/{endpoint['id']}"
    changed = alice.client.patch(url, {"filter": {"type": "order.sent"}}, format="json")
    assert changed.status_code == 200 and changed.json()["filter"] == {"type": "order.sent"}
    refused = alice.client.patch(url, {"filter": {"type": {"$gt": None}}}, format="json")
    assert refused.status_code == 400 and "filter.type.$gt" in refused.json()["errors"]
    assert _post_event(alice, {"amount": 500}, "order.sent")["deliveries"]
    assert alice.client.patch(url, {"filter": None}, format="json").json()["filter"] is None
    assert _post_event(alice, {}, "anything.else")["deliveries"]


def test_filter_test_explains_with_the_endpoints_own_filter(alice):
    endpoint = _create(alice, filter=BIG)
    url = f"/api/v1/endpoints/{endpoint['id']}/filter-test"
    response = alice.client.post(
        url, {"event": {"type": "order.paid", "data": {"amount": 20}}}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {
        "matches": False,
        "explanation": "filter.data.amount.$gte: 20 is not ≥ 100",
    }


def test_filter_test_tries_a_new_filter_against_an_earlier_event(alice):
    endpoint = _create(alice)
    event = _post_event(alice, {"amount": 20, "tags": ["eu"]})
    url = f"/api/v1/endpoints/{endpoint['id']}/filter-test"
    tried = {"filter": {"data": {"tags": "eu"}}, "event_id": event["id"]}
    answer = alice.client.post(url, tried, format="json").json()
    assert answer == {"matches": True, "explanation": "Every clause matched."}
    # Nothing was written or sent by trying.
    assert Delivery.objects.filter(endpoint_id=endpoint["id"]).count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "event"),
        ({"event": {"type": "a", "data": {}}, "event_id": "evt_x"}, "event"),
        ({"event_id": "evt_nope"}, "event_id"),
        ({"event": {"type": "a b", "data": {}}}, "event.type"),
        ({"event": {"type": "a", "data": []}}, "event.data"),
        ({"event": {"type": "a", "data": {}}, "filter": {"$bad": 1}}, "filter.$bad"),
    ],
)
def test_filter_test_refuses_bad_input_naming_the_field(alice, body, field):
    endpoint = _create(alice)
    response = alice.client.post(
        f"/api/v1/endpoints/{endpoint['id']}/filter-test", body, format="json"
    )
    assert response.status_code == 400 and field in response.json()["errors"], response.content


def test_bob_cannot_try_filters_on_alices_endpoint_or_events(alice, bob):
    endpoint = _create(alice)
    event = _post_event(alice, {"amount": 1})
    url = f"/api/v1/endpoints/{endpoint['id']}/filter-test"
    assert bob.client.post(url, {"event_id": event["id"]}, format="json").status_code == 404
    own = _create(bob)
    response = bob.client.post(
        f"/api/v1/endpoints/{own['id']}/filter-test", {"event_id": event["id"]}, format="json"
    )
    assert response.status_code == 400 and "event_id" in response.json()["errors"]


def test_carol_tries_filters_only_on_events_her_endpoints_were_sent(alice):
    carol = _consumer(alice, "carol")
    hers = _create(alice, owner="carol", event_types=["order.*"])
    _create(alice, owner="dave", event_types=["invoice.*"])
    sent_to_her = _post_event(alice, {"amount": 1}, "order.paid")
    daves = _post_event(alice, {"secret": "dave's"}, "invoice.paid")
    url = f"/api/v1/endpoints/{hers['id']}/filter-test"
    assert carol.post(url, {"event_id": sent_to_her["id"]}, format="json").status_code == 200
    refused = carol.post(url, {"event_id": daves["id"]}, format="json")
    assert refused.status_code == 400 and "event_id" in refused.json()["errors"]


def test_carol_sets_a_filter_on_her_endpoint(alice):
    carol = _consumer(alice, "carol")
    made = carol.post("/api/v1/endpoints", {"url": URL, "filter": BIG}, format="json")
    assert made.status_code == 201 and made.json()["filter"] == BIG


SECRETIVE = {"data": {"customer": {"id": {"$in": ["cus_secret_4711"]}}, "country": "LU"}}


def _stored_filter(endpoint_id):
    with connection.cursor() as cursor:
        cursor.execute("SELECT filter FROM webhooks_endpoint WHERE id = %s", [endpoint_id])
        return cursor.fetchone()[0]


def test_the_table_holds_the_filter_encrypted_and_the_api_shows_it(alice):
    endpoint = _create(alice, filter=SECRETIVE)
    column = _stored_filter(endpoint["id"])
    assert column and "cus_secret_4711" not in column and "customer" not in column
    # Quoted: a ciphertext's base64 may hold the letters "LU" (one in ~20 did), never a
    # quote or a dollar sign.
    assert '"LU"' not in column and "$in" not in column
    shown = alice.client.get(f"/api/v1/endpoints/{endpoint['id']}").json()["filter"]
    assert shown == SECRETIVE
    assert _post_event(alice, {"customer": {"id": "cus_secret_4711"}, "country": "LU"})[
        "deliveries"
    ]
    assert not _post_event(alice, {"customer": {"id": "cus_1"}, "country": "LU"})["deliveries"]


def test_the_key_rotation_reencrypts_the_filter(alice, settings):
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.HOMING_ENCRYPTION_KEY = [old_key]
    endpoint = _create(alice, filter=SECRETIVE)
    settings.HOMING_ENCRYPTION_KEY = [new_key, old_key]
    call_command("rotate_encryption_key")
    settings.HOMING_ENCRYPTION_KEY = [new_key]  # the old key is gone
    assert alice.client.get(f"/api/v1/endpoints/{endpoint['id']}").json()["filter"] == SECRETIVE


def test_the_migration_encrypts_existing_filters_and_keeps_routing_by_them(transactional_db):
    before = [("webhooks", "0015_event_trace_context")]
    old_apps = migrate(before)
    tenant = old_apps.get_model("webhooks", "Tenant").objects.create(id="ten_m", name="m")
    old_endpoints = old_apps.get_model("webhooks", "Endpoint").objects
    for pk, spec in [("ep_a", SECRETIVE), ("ep_b", None), ("ep_c", {})]:
        old_endpoints.create(
            id=pk, tenant=tenant, url=URL, secret=crypto.encrypt("whsec_x"), filter=spec
        )

    migrate(latest())

    assert "cus_secret_4711" not in _stored_filter("ep_a")
    assert _stored_filter("ep_b") == ""
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk="ep_a")) == SECRETIVE
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk="ep_c")) == {}
    routing.routing_forget()
    event = event_ingest(
        tenant=Tenant.objects.get(pk="ten_m"), event_type="a.b", data={"country": "DE"}
    )
    assert sorted(d.endpoint_id for d in event.deliveries) == ["ep_b", "ep_c"]
    # The routing trigger is back: a changed filter bumps the tenant's routing version.
    version = RoutingVersion.objects.get(tenant_id="ten_m").version
    Endpoint.objects.filter(pk="ep_a").update(filter="")
    assert RoutingVersion.objects.get(tenant_id="ten_m").version != version
