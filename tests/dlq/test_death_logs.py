"""A delivery that becomes dead is logged at WARNING with its ids and reason."""

from __future__ import annotations

import logging

import pytest
from django.db import transaction
from django.utils import timezone

from deliveries.lifecycle.in_hand import in_hand_of
from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.models import Delivery
from deliveries.results import SendResult
from deliveries.worker.claims import deliveries_claim
from dlq.services.dead_letters import dead_letters_create


@pytest.mark.django_db(transaction=True)
def test_a_dead_delivery_is_logged_with_its_four_ids_and_reason(make_actor, caplog):
    alice = make_actor("Alice")
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    [delivery] = deliveries_claim(limit=10, policy=current_policy())

    with caplog.at_level(logging.WARNING, logger="dlq.services.dead_letters"):
        attempts_record(
            outcomes=[
                Attempted(
                    delivery,
                    SendResult(404, None, b"no", None, 5),
                    timezone.now(),
                    current_policy(),
                )
            ]
        )

    [record] = [r for r in caplog.records if r.name == "dlq.services.dead_letters"]
    assert record.levelno == logging.WARNING
    assert "HTTP 404 (not retryable)" in record.getMessage()
    assert (record.tenant_id, record.event_id, record.delivery_id, record.endpoint_id) == (
        delivery.tenant_id,
        delivery.event_id,
        delivery.id,
        delivery.endpoint_id,
    )


@pytest.mark.django_db(transaction=True)
def test_nothing_is_logged_for_a_death_that_rolls_back(make_actor, caplog):
    alice = make_actor("Alice")
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    delivery = Delivery.objects.select_related("event").get()
    with (
        caplog.at_level(logging.WARNING, logger="dlq.services.dead_letters"),
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        dead_letters_create(
            deliveries=[in_hand_of(delivery)], reasons=["x"], dead_at=timezone.now()
        )
        raise RuntimeError("rolled back")
    assert [r for r in caplog.records if r.name == "dlq.services.dead_letters"] == []
