"""Custom headers stored encrypted still reach the receiver in plain text."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_a_worker_sends_the_custom_header_values_in_plain_text(alice, homing, receiver_factory):
    receiver = receiver_factory()
    headers = {"Authorization": "Bearer alice-token-9", "X-Tenant": "acme"}
    created = alice.client.post(
        "/api/v1/endpoints", {"url": receiver.url, "headers": headers}, format="json"
    )
    assert created.status_code == 201
    homing("worker")
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": 1}}, format="json")
    [request] = receiver.wait_for(1)
    assert request.headers["authorization"] == "Bearer alice-token-9"
    assert request.headers["x-tenant"] == "acme"
