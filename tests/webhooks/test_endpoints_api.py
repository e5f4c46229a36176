from __future__ import annotations

import base64

import pytest

from deliveries.lifecycle.endpoint_backlogs import endpoint_backlog_clear
from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.factories import NOWHERE, endpoint_via_api

URL = NOWHERE  # what endpoint_via_api makes unless told otherwise


def test_it_creates_an_endpoint_with_a_secret(alice):
    body = endpoint_via_api(
        alice,
        description="orders",
        event_types=["order.*"],
        rate_limit=5,
        headers={"X-Token": "abc"},
    )
    assert set(body) == {
        "id",
        "url",
        "tls_client_certificate_info",
        "description",
        "event_types",
        "filter",
        "rate_limit",
        "headers",
        "is_active",
        "owner",
        "signing",
        "auth",
        "unreadable",
        "circuit_state",
        "consecutive_failures",
        "failing_since",
        "disabled_reason",
        "secret",
        "created_at",
    }
    assert body["url"] == URL and body["event_types"] == ["order.*"] and body["rate_limit"] == 5
    assert body["headers"] == {"X-Token": "abc"} and body["is_active"] is True
    assert body["secret"].startswith("whsec_") and body["unreadable"] == []
    assert len(base64.b64decode(body["secret"].removeprefix("whsec_"))) >= 24
    assert body["created_at"].endswith("Z")


def test_it_defaults_optional_fields(alice):
    body = endpoint_via_api(alice)
    assert body["event_types"] == [] and body["rate_limit"] is None
    assert body["headers"] == {} and body["description"] == ""


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": "https://example.com/" + "a" * 2048}, "url"),
        ({}, "url"),
        ({"url": URL, "event_types": "order.created"}, "event_types"),
        ({"url": URL, "event_types": ["order.*.x"]}, "event_types"),
        ({"url": URL, "rate_limit": 0}, "rate_limit"),
        ({"url": URL, "rate_limit": "fast"}, "rate_limit"),
        ({"url": URL, "headers": {"webhook-id": "x"}}, "headers"),
        ({"url": URL, "headers": {"Content-Type": "text/plain"}}, "headers"),
        ({"url": URL, "headers": {"User-Agent": "me"}}, "headers"),
        ({"url": URL, "headers": {"Host": "evil"}}, "headers"),
        ({"url": URL, "headers": {"X-A": "a\r\nX-B: b"}}, "headers"),
        ({"url": URL, "headers": ["X-A"]}, "headers"),
        ({"url": URL, "is_active": "perhaps"}, "is_active"),
    ],
)
def test_it_refuses_bad_input_naming_the_field(alice, payload, field):
    response = alice.client.post("/api/v1/endpoints", payload, format="json")
    assert response.status_code == 400
    body = response.json()
    assert field in body["errors"] and field in body["message"]


def test_it_refuses_non_json_bodies(alice):
    response = alice.client.post("/api/v1/endpoints", "{nope", content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["message"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://localhost:8000/x",
        "http://10.1.2.3/x",
        "http://169.254.169.254/latest",
        "http://[::1]/x",
        "http://192.168.0.1/",
    ],
)
def test_it_refuses_private_addresses_unless_allowed(alice, settings, url):
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = False
    response = alice.client.post("/api/v1/endpoints", {"url": url}, format="json")
    assert response.status_code == 400
    assert "private" in response.json()["errors"]["url"][0]
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = True
    assert alice.client.post("/api/v1/endpoints", {"url": url}, format="json").status_code == 201


def test_it_accepts_a_public_host_that_does_not_resolve_here(alice, settings):
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = False
    response = alice.client.post(
        "/api/v1/endpoints", {"url": "https://hooks.example.invalid/x"}, format="json"
    )
    assert response.status_code == 201


def test_it_lists_endpoints_newest_first_with_pagination(alice):
    ids = [endpoint_via_api(alice, description=str(n))["id"] for n in range(3)]
    page = alice.client.get("/api/v1/endpoints?limit=2").json()
    assert [e["id"] for e in page["results"]] == ids[::-1][:2]
    assert page["next"]
    rest = alice.client.get(page["next"]).json()
    assert [e["id"] for e in rest["results"]] == ids[:1] and rest["next"] is None


def test_it_updates_and_deletes_an_endpoint(alice):
    endpoint = endpoint_via_api(alice)
    url = f"/api/v1/endpoints/{endpoint['id']}"
    response = alice.client.patch(
        url, {"description": "new", "event_types": ["a.b"]}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["description"] == "new" and response.json()["url"] == URL
    assert alice.client.get(url).json()["event_types"] == ["a.b"]
    assert alice.client.patch(url, {"url": "gopher://x"}, format="json").status_code == 400
    assert alice.client.delete(url).status_code == 204
    assert alice.client.get(url).status_code == 404


def test_it_rotates_the_secret(alice):
    endpoint = endpoint_via_api(alice)
    response = alice.client.post(f"/api/v1/endpoints/{endpoint['id']}/rotate-secret")
    assert response.status_code == 200
    new_secret = response.json()["secret"]
    assert new_secret.startswith("whsec_") and new_secret != endpoint["secret"]
    shown = alice.client.get(f"/api/v1/endpoints/{endpoint['id']}/secret")
    assert shown.status_code == 200 and shown.json() == {"secret": new_secret}


def test_deactivating_an_endpoint_parks_its_pending_deliveries(alice):
    endpoint = endpoint_via_api(alice)
    event = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    assert event["deliveries"][0]["status"] == "pending"
    response = alice.client.patch(
        f"/api/v1/endpoints/{endpoint['id']}", {"is_active": False}, format="json"
    )
    assert response.status_code == 200
    # Parked by the background job the PATCH starts (what its Celery task runs).
    endpoint_backlog_clear(endpoint_id=endpoint["id"])
    delivery = Delivery.objects.get(pk=event["deliveries"][0]["id"])
    assert delivery.status == Delivery.Status.DEAD
    assert DeadLetter.objects.get(delivery=delivery).reason == "endpoint deactivated"
