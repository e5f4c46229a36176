"""Claims and the scheduler's sweep, against the real database (no worker)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries.models import Attempt, Delivery
from deliveries.policy import current_policy
from deliveries.services.claims import deliveries_claim
from deliveries.services.scheduling import (
    deliveries_publish_due,
    deliveries_recover_expired_leases,
)
from dlq.models import DeadLetter


@pytest.fixture
def deliveries(alice):
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    for n in range(5):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    return list(Delivery.objects.order_by("created_at"))


def claim(ids=(), take_more=True, limit=50):
    return [
        i
        for i, _ in deliveries_claim(
            delivery_ids=list(ids), limit=limit, policy=current_policy(), take_more=take_more
        )
    ]


def test_a_claim_takes_due_deliveries_once(deliveries):
    first = claim([deliveries[0].id], take_more=False)
    assert first == [deliveries[0].id]
    assert claim([deliveries[0].id], take_more=False) == []  # a repeated message sends nothing
    rest = claim()
    assert sorted(rest) == sorted(d.id for d in deliveries[1:])
    claimed = Delivery.objects.get(pk=deliveries[0].id)
    assert claimed.status == "delivering" and claimed.attempt_count == 1
    assert claimed.lease_expires_at > timezone.now()


def test_a_delivery_is_never_claimed_before_it_is_due(deliveries):
    Delivery.objects.update(next_attempt_at=timezone.now() + timedelta(seconds=30))
    assert claim([d.id for d in deliveries]) == []


def test_the_sweep_publishes_due_work_once_per_grace_period(deliveries):
    Delivery.objects.update(dispatched_until=None)
    assert deliveries_publish_due() == 5
    assert deliveries_publish_due() == 0  # a message is out for each
    Delivery.objects.update(dispatched_until=timezone.now() - timedelta(seconds=1))
    assert deliveries_publish_due() == 5  # the messages were lost: publish again


def test_an_expired_lease_records_worker_lost_and_retries(deliveries):
    delivery = deliveries[0]
    claim([delivery.id], take_more=False)
    Delivery.objects.filter(pk=delivery.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert deliveries_recover_expired_leases() == 1
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.next_attempt_at > timezone.now()
    attempt = Attempt.objects.get(delivery=delivery)
    assert attempt.number == 1 and attempt.error == "worker lost"
    assert deliveries_recover_expired_leases() == 0


def test_a_lost_last_attempt_ends_in_the_dead_letter_queue(deliveries, settings):
    settings.HOMING_RETRY_SCHEDULE = "1s"
    delivery = deliveries[0]
    Delivery.objects.filter(pk=delivery.pk).update(
        status="delivering",
        attempt_count=2,
        next_attempt_at=timezone.now(),
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert deliveries_recover_expired_leases() == 1
    delivery.refresh_from_db()
    assert delivery.status == "dead"
    assert DeadLetter.objects.get(delivery=delivery).reason == "worker lost after 2 attempts"
