"""Client.publish_batch against the real Homing API (POST /api/v1/events/batch)."""

from __future__ import annotations

import pytest
from homing_client import Client

from webhooks.models import Event

pytestmark = pytest.mark.e2e


def test_publish_batch_creates_the_events_in_order_and_a_retry_replays_them(alice, homing_api):
    client = Client(homing_api.url, alice.key)
    events = [
        {"type": "order.created", "data": {"order_id": 1}},
        {"type": "order.paid", "data": {"order_id": 1, "amount": 4200}},
    ]

    created = client.publish_batch(events, idempotency_key="batch-1")
    replayed = client.publish_batch(events, idempotency_key="batch-1")

    assert [(e["type"], e["data"]) for e in created] == [(e["type"], e["data"]) for e in events]
    assert replayed == created  # same key, same body: Homing's first answer, nothing new
    assert sorted(Event.objects.values_list("id", flat=True)) == sorted(e["id"] for e in created)
