"""Leases (issue #20): renewed while a delivery is held, and fenced by the claim's attempt
number, so a give-back, renewal or record from a claim whose lease lapsed (and whose
delivery another claim took since) changes nothing; a recording transaction waits for
another's row lock only so long. Against the real database."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import psycopg
import pytest
from django.db import OperationalError
from django.utils import timezone

from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.lifecycle.scheduling import deliveries_recover_expired_leases
from deliveries.models import Delivery
from deliveries.results import SendResult
from deliveries.worker.claims import (
    deliveries_claim,
    deliveries_give_back,
    deliveries_renew_leases,
)
from deliveries.worker.worker import Worker
from tests.databases import postgresql_only
from tests.factories import endpoint_id_via_api, event_via_api


def all_due() -> None:
    """Every pending delivery due by the database's clock. A new delivery is due at the
    database time this process estimates (core/clock.py), which a loaded machine may put
    a round trip's half ahead: a claim right after the ingest found 1 of 2 due once."""
    Delivery.objects.filter(status="pending").update(
        next_attempt_at=timezone.now() - timedelta(minutes=1)
    )


@pytest.fixture
def delivery(alice) -> Delivery:
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    all_due()
    return Delivery.objects.get()


def claim_one():
    (claimed,) = deliveries_claim(limit=1, policy=current_policy())
    return claimed


def lease_of(delivery_id: str) -> datetime:
    lease = Delivery.objects.get(pk=delivery_id).lease_expires_at
    assert lease is not None
    return lease


def lapse(delivery_id: str) -> None:
    Delivery.objects.filter(pk=delivery_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def test_a_renewal_gives_a_held_delivery_a_whole_lease_again(delivery) -> None:
    claimed = claim_one()
    Delivery.objects.filter(pk=claimed.id).update(
        lease_expires_at=timezone.now() + timedelta(seconds=2)
    )
    lease = current_policy().lease_seconds
    assert deliveries_renew_leases(held=[(claimed.id, claimed.attempt_count)], lease_seconds=lease)
    assert lease_of(claimed.id) > timezone.now() + timedelta(seconds=lease - 5)


def test_a_claim_whose_lease_lapsed_cannot_give_back_or_renew_the_next_claim_s_delivery(
    delivery,
) -> None:
    first = claim_one()
    lapse(first.id)
    assert deliveries_recover_expired_leases() == 1  # the scheduler: `worker lost`
    all_due()
    second = claim_one()
    assert second.attempt_count == first.attempt_count + 1

    deliveries_give_back(deliveries=[first])  # the first worker, late
    assert not deliveries_renew_leases(held=[(first.id, first.attempt_count)], lease_seconds=3600)
    row = Delivery.objects.get(pk=first.id)
    # Still the second claim's: given back, it would be claimed and sent a third time.
    assert (row.status, row.attempt_count) == ("delivering", second.attempt_count)
    assert lease_of(first.id) < timezone.now() + timedelta(seconds=600)

    deliveries_give_back(deliveries=[second])  # its own claim may
    row = Delivery.objects.get(pk=first.id)
    assert (row.status, row.attempt_count) == ("pending", first.attempt_count)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.django_db(transaction=True)
def test_the_worker_renews_the_leases_of_what_it_holds_and_only_those(alice) -> None:
    endpoint_id_via_api(alice, "http://127.0.0.1:9/h")
    for n in range(2):
        event_via_api(alice, "a.b", {"n": n})
    all_due()
    claimed = deliveries_claim(limit=2, policy=current_policy())
    assert len(claimed) == 2, Delivery.objects.values_list("status", "next_attempt_at")
    held, other = claimed
    soon = timezone.now() + timedelta(seconds=2)
    Delivery.objects.update(lease_expires_at=soon)
    clock = Clock()
    worker = Worker(capacity=4, clock=clock)  # not started: its housekeeping is called here
    worker.ledger.admit([held], worker.ledger.reserve(1), lease_seconds=60)
    worker.claims.housekeeping()
    assert lease_of(held.id) > soon + timedelta(seconds=10)
    assert Delivery.objects.get(pk=other.id).lease_expires_at == soon
    Delivery.objects.filter(pk=held.id).update(lease_expires_at=soon)
    clock.now += 1  # a second on: the next renewal is a third of a lease away
    worker.claims.housekeeping()
    assert lease_of(held.id) == soon
    clock.now += current_policy().lease_seconds
    worker.claims.housekeeping()
    assert lease_of(held.id) > soon + timedelta(seconds=10)
    worker.ledger.finish(held)
    assert worker.ledger.held() == []


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_recording_waits_for_another_transaction_s_row_lock_only_so_long(
    alice, postgres_dsn, monkeypatch
) -> None:
    monkeypatch.setattr("deliveries.lifecycle.recording.LOCK_TIMEOUT", "300ms")
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    all_due()
    claimed = claim_one()
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        with psycopg.connect(postgres_dsn) as other, other.transaction():
            other.execute(
                "SELECT 1 FROM deliveries_delivery WHERE id = %s FOR UPDATE", [claimed.id]
            )
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert locked.wait(10)
        result = SendResult(200, None, b"ok", None, 5)
        outcome = Attempted(claimed, result, timezone.now(), current_policy())
        # Without a lock timeout this waits until the other transaction ends (30 s here).
        with pytest.raises(OperationalError, match="lock timeout"):
            attempts_record(outcomes=[outcome])
    finally:
        release.set()
        holder.join()
    assert attempts_record(outcomes=[outcome])[0] is not None  # then it records
