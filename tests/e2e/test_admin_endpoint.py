"""An endpoint made in the Django admin delivers like one made through the API."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from homing_receiver import Webhook

from tests.processes import wait_until
from webhooks.models import Endpoint

pytestmark = pytest.mark.e2e


def test_an_admin_created_endpoint_delivers_signed_webhooks(alice, homing, receiver_factory):
    receiver = receiver_factory()
    staff = Client()
    staff.force_login(User.objects.create_superuser("root", "r@example.com", "pw-for-tests"))
    response = staff.post(
        "/admin/webhooks/endpoint/add/",
        {
            "tenant": alice.tenant.pk,
            "url": receiver.url,
            "description": "",
            "event_types": "[]",
            "rate_limit": "",
            "headers": "{}",
            "is_active": "on",
        },
    )
    assert response.status_code == 302
    endpoint = Endpoint.objects.get()
    secret = alice.client.get(f"/api/v1/endpoints/{endpoint.id}/secret").json()["secret"]
    homing("worker")
    event = alice.client.post(
        "/api/v1/events", {"type": "a.b", "data": {"n": 1}}, format="json"
    ).json()

    [request] = receiver.wait_for(1)
    assert Webhook(secret).verify(request.body, request.headers)["id"] == event["id"]
    wait_until(
        lambda: (
            alice.client.get(f"/api/v1/deliveries/{event['deliveries'][0]['id']}").json()["status"]
            == "succeeded"
        )
    )
