from __future__ import annotations

from deliveries.models import Delivery
from tests.factories import endpoint_via_api
from webhooks.models import Event


def test_it_sends_a_test_event_to_that_endpoint_only(alice):
    orders = endpoint_via_api(alice, event_types=["order.*"])
    endpoint_via_api(alice)  # takes every event type, but must not get the test

    response = alice.client.post(f"/api/v1/endpoints/{orders['id']}/test")

    assert response.status_code == 202, response.content
    body = response.json()
    assert set(body) == {"event_id", "delivery_id"}
    event = Event.objects.get(pk=body["event_id"])
    assert event.type == "homing.test" and event.data == {"test": True}
    assert event.tenant_id == alice.tenant.id
    deliveries = list(Delivery.objects.filter(event=event))
    assert [(d.id, d.endpoint_id, d.status) for d in deliveries] == [
        (body["delivery_id"], orders["id"], "pending")
    ]


def test_it_hides_another_tenants_endpoint(alice, bob):
    endpoint = endpoint_via_api(alice)

    response = bob.client.post(f"/api/v1/endpoints/{endpoint['id']}/test")

    assert response.status_code == 404
    assert not Event.objects.exists()


def test_it_refuses_an_inactive_endpoint(alice):
    endpoint = endpoint_via_api(alice, is_active=False)

    response = alice.client.post(f"/api/v1/endpoints/{endpoint['id']}/test")

    assert response.status_code == 409
    assert "deactivated" in response.json()["message"]
    assert not Event.objects.exists()


def test_it_is_in_the_openapi_schema(alice):
    schema = alice.client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/endpoints/{id}/test"]["post"]
    assert "202" in operation["responses"]
