"""Recording attempts: unstorable values are made storable, a bad row never takes its
batch down with it, and every result is recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries.lifecycle import recording
from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.models import Attempt, Delivery
from deliveries.results import ErrorKind, SendResult
from deliveries.worker.claims import deliveries_claim
from dlq.models import DeadLetter


@pytest.fixture
def claimed(alice):
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    for n in range(4):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    return deliveries_claim(limit=10, policy=current_policy())


def outcome(delivery, result) -> Attempted:
    return Attempted(delivery, result, timezone.now(), current_policy())


def ok(body: bytes = b"ok") -> SendResult:
    return SendResult(200, None, body, None, 5)


def test_nul_bytes_and_overlong_texts_are_stored_sanitised(claimed) -> None:
    reason = "x" * 2000
    results = [
        ok(b"a\x00b"),
        SendResult.failed(ErrorKind.CONNECTION, f"connection error: bad status line {reason}\x00"),
        SendResult(400, None, b"\x00" * 10, None, 1),  # fatal: dead letter with a reason
        SendResult(503, None, b"", "Wed, 21 Oct 99999999999 07:28:00 GMT", 1),
    ]
    recorded = attempts_record(outcomes=[outcome(d, r) for d, r in zip(claimed, results)])
    assert all(recorded)
    attempts = {a.delivery_id: a for a in Attempt.objects.all()}
    assert attempts[claimed[0].id].response_body == "a\ufffdb"
    assert "\x00" not in attempts[claimed[1].id].error
    assert len(attempts[claimed[1].id].error) == 500
    assert len(Delivery.objects.get(pk=claimed[1].id).last_error) <= 500
    assert DeadLetter.objects.filter(delivery_id=claimed[2].id).exists()
    retried = Delivery.objects.get(pk=claimed[3].id)
    assert retried.status == "pending"  # the absurd Retry-After is ignored
    assert retried.next_attempt_at is not None
    assert retried.next_attempt_at < timezone.now() + timedelta(minutes=1)


def test_a_row_that_fails_is_written_alone_and_the_rest_of_the_batch_stands(
    claimed, monkeypatch
) -> None:
    original = recording._attempt_row
    poisoned = claimed[1].id

    def attempt_row(delivery, result, started_at):
        row = original(delivery, result, started_at)
        if delivery.id == poisoned and result.response_body != b"could not record the attempt":
            row["error"] = "\x00 cannot be stored"  # what sanitising would have prevented
        return row

    monkeypatch.setattr(recording, "_attempt_row", attempt_row)
    recorded = attempts_record(outcomes=[outcome(d, ok()) for d in claimed])

    assert [r.delivery_id for r in recorded if r] == [d.id for d in claimed]
    assert Delivery.objects.filter(status="succeeded").count() == len(claimed)
    stored = Attempt.objects.get(delivery_id=poisoned)
    assert stored.status_code == 200 and stored.response_body == "could not record the attempt"
    assert Attempt.objects.count() == len(claimed)


def test_the_lease_sweep_records_through_the_same_service(claimed) -> None:
    Delivery.objects.filter(pk=claimed[0].id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    from deliveries.lifecycle.scheduling import deliveries_recover_expired_leases

    assert deliveries_recover_expired_leases() == 1
    assert Attempt.objects.get(delivery_id=claimed[0].id).error == "worker lost"
    assert Delivery.objects.get(pk=claimed[0].id).status == "pending"
    # The others' leases have not expired: a worker recording now still wins.
    assert attempts_record(outcomes=[outcome(claimed[1], ok())])[0] is not None


def test_a_failing_chart_figure_does_not_undo_a_recorded_batch(claimed, monkeypatch) -> None:
    def broken(**kwargs):
        raise RuntimeError("attempt_minute row locked")

    monkeypatch.setattr(recording, "attempt_minutes_add", broken)
    recorded = attempts_record(outcomes=[outcome(d, ok()) for d in claimed])

    assert [r.delivery_id for r in recorded if r] == [d.id for d in claimed]
    assert Delivery.objects.filter(status="succeeded").count() == len(claimed)
