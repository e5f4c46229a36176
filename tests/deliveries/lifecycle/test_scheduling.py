"""Claims and the scheduler's sweep, against the real database (no worker)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.scheduling import (
    deliveries_recover_expired_leases,
    deliveries_wake_for_due,
)
from deliveries.models import Attempt, Delivery
from deliveries.wakeups import doorbell_answered
from deliveries.worker.claims import deliveries_claim, deliveries_due_exist
from dlq.models import DeadLetter


@pytest.fixture
def deliveries(alice):
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    for n in range(5):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    return list(Delivery.objects.order_by("created_at"))


def claim(limit=50):
    return [c.id for c in deliveries_claim(limit=limit, policy=current_policy())]


def test_a_claim_takes_the_oldest_due_deliveries_and_each_once(deliveries):
    oldest = deliveries[0]
    assert claim(limit=1) == [oldest.id]
    rest = claim()  # the others, never the same one again
    assert sorted(rest) == sorted(d.id for d in deliveries[1:])
    assert claim() == []
    claimed = Delivery.objects.get(pk=oldest.id)
    assert claimed.status == "delivering" and claimed.attempt_count == 1
    assert claimed.lease_expires_at is not None and claimed.lease_expires_at > timezone.now()


def test_a_claim_carries_what_the_attempt_needs(deliveries):
    target = deliveries[0]
    (claimed,) = deliveries_claim(limit=1, policy=current_policy())
    assert (claimed.id, claimed.tenant_id, claimed.attempt_count) == (
        target.id,
        target.tenant_id,
        1,
    )
    assert claimed.event.id == target.event_id and claimed.event.data == {"n": 0}
    assert claimed.event.type == "a.b" and claimed.event.created_at == target.event.created_at
    assert claimed.endpoint.url == "http://127.0.0.1:9/h"


def test_due_work_is_seen_without_a_write(deliveries, django_assert_num_queries):
    assert deliveries_due_exist()
    Delivery.objects.update(next_attempt_at=timezone.now() + timedelta(seconds=30))
    with django_assert_num_queries(1):
        assert not deliveries_due_exist()


def test_a_delivery_is_never_claimed_before_it_is_due(deliveries):
    Delivery.objects.update(next_attempt_at=timezone.now() + timedelta(seconds=30))
    assert claim() == []


def test_the_sweep_wakes_workers_with_one_message_while_the_doorbell_is_up(deliveries, redis_url):
    queued = redis.Redis.from_url(redis_url).llen
    assert deliveries_wake_for_due() == 1  # naming the earliest of the 5 due
    assert deliveries_wake_for_due() == 1  # still due ...
    assert queued("celery") == 1  # ... but a wake-up is already on its way
    doorbell_answered()  # a worker took it
    deliveries_wake_for_due()
    assert queued("celery") == 2
    Delivery.objects.update(next_attempt_at=timezone.now() + timedelta(seconds=30))
    doorbell_answered()
    assert deliveries_wake_for_due() == 0 and queued("celery") == 2


def test_an_expired_lease_records_worker_lost_and_retries(deliveries):
    delivery = deliveries[0]
    assert claim(limit=1) == [delivery.id]
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


def test_a_claim_skips_endpoints_with_enough_in_flight(deliveries):
    busy = deliveries[0].endpoint_id
    skipped = deliveries_claim(limit=50, policy=current_policy(), skip_endpoints={busy})
    assert skipped == []
    assert Delivery.objects.filter(status="pending").count() == len(deliveries)
