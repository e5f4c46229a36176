"""The Django admin creates and changes endpoints through the same services as the API."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from deliveries.lifecycle.endpoint_backlogs import endpoint_backlog_clear
from deliveries.models import Delivery
from dlq.models import DeadLetter
from webhooks.models import Endpoint
from webhooks.services.endpoints import endpoint_signing_secrets

ADD = "/admin/webhooks/endpoint/add/"


@pytest.fixture
def staff(db):
    user = User.objects.create_superuser("root", "root@example.com", "pw-for-tests")
    client = Client()
    client.force_login(user)
    return client


def form(tenant, **fields):
    return {
        "tenant": tenant.pk,
        "url": "http://127.0.0.1:9/hooks",
        "description": "",
        "event_types": "[]",
        "rate_limit": "",
        "headers": "{}",
        "is_active": "on",
        **fields,
    }


def test_an_endpoint_added_in_the_admin_gets_a_secret(staff, alice):
    response = staff.post(ADD, form(alice.tenant))
    assert response.status_code == 302, response.content.decode()[-2000:]
    endpoint = Endpoint.objects.get()
    [secret] = endpoint_signing_secrets(endpoint=endpoint)
    assert secret.startswith("whsec_")
    shown = alice.client.get(f"/api/v1/endpoints/{endpoint.id}/secret").json()["secret"]
    assert shown == secret


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"headers": '{"X-A\\n": "b"}'}, "not a valid header name"),
        ({"headers": '{"Webhook-Id": "b"}'}, "set by Homing"),
        ({"url": "http://example.com:99999/x"}, "port"),
        ({"rate_limit": "0"}, ""),
        ({"event_types": '["a b"]'}, "pattern"),
    ],
)
def test_the_admin_refuses_what_the_api_refuses(staff, alice, fields, message):
    response = staff.post(ADD, form(alice.tenant, **fields))
    assert response.status_code == 200  # the form again, with the error
    assert message in response.content.decode()
    assert Endpoint.objects.count() == 0


def test_the_admin_keeps_the_endpoint_limit(staff, alice, settings):
    settings.HOMING_MAX_ENDPOINTS_PER_TENANT = 1
    assert staff.post(ADD, form(alice.tenant)).status_code == 302
    response = staff.post(ADD, form(alice.tenant))
    assert response.status_code == 200
    assert "HOMING_MAX_ENDPOINTS_PER_TENANT" in response.content.decode()
    assert Endpoint.objects.count() == 1


def test_deactivating_in_the_admin_parks_pending_deliveries(staff, alice):
    created = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/hooks"}, format="json"
    ).json()
    event = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    change = f"/admin/webhooks/endpoint/{created['id']}/change/"
    data = form(alice.tenant)
    del data["is_active"]  # an unticked checkbox
    response = staff.post(change, data)
    assert response.status_code == 302, response.content.decode()[-2000:]
    endpoint_backlog_clear(endpoint_id=created["id"])  # the job the save started
    delivery = Delivery.objects.get(pk=event["deliveries"][0]["id"])
    assert delivery.status == Delivery.Status.DEAD
    assert DeadLetter.objects.get(delivery=delivery).reason == "endpoint deactivated"


def test_the_admin_shows_endpoint_health_without_letting_it_be_edited(staff, alice):
    created = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/hooks"}, format="json"
    ).json()
    Endpoint.objects.filter(pk=created["id"]).update(circuit_state="open", consecutive_failures=12)
    change = f"/admin/webhooks/endpoint/{created['id']}/change/"
    page = staff.get(change).content.decode()
    assert "Consecutive failures" in page and 'name="consecutive_failures"' not in page
    staff.post(change, {**form(alice.tenant), "consecutive_failures": "0"})
    assert Endpoint.objects.get(pk=created["id"]).consecutive_failures == 12


def test_deleting_in_the_admin_hides_the_endpoint_and_leaves_the_rows_to_the_job(staff, alice):
    created = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/hooks"}, format="json"
    ).json()
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    delete = f"/admin/webhooks/endpoint/{created['id']}/delete/"
    with CaptureQueriesContext(connection) as queries:
        assert staff.get(delete).status_code == 200  # the confirmation page
    assert not [q for q in queries.captured_queries if "deliveries_" in q["sql"]]
    assert staff.post(delete, {"post": "yes"}).status_code == 302
    assert alice.client.get(f"/api/v1/endpoints/{created['id']}").status_code == 404
    assert Delivery.objects.filter(endpoint_id=created["id"]).count() == 1
    endpoint_backlog_clear(endpoint_id=created["id"])
    assert not Delivery.objects.filter(endpoint_id=created["id"]).exists()
    assert not Endpoint.all_objects.filter(pk=created["id"]).exists()
