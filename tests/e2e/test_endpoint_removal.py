"""Deactivating or deleting an endpoint while a real worker is sending its deep backlog:
the request answers at once, nothing more is sent to it beyond what was in flight, the
backlog is parked or removed by the background job, and nothing fails meanwhile."""

from __future__ import annotations

import time

import pytest

from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.backlogs import pending_backlog
from tests.processes import wait_until
from tests.receivers import Answer
from webhooks.models import Endpoint

pytestmark = pytest.mark.e2e

BACKLOG = 20_000
ANSWERS_WITHIN = 1.0  # generous: the old request took seconds for this backlog


def sending_backlog(actor, url: str, rows: int = BACKLOG, due: str = "now()") -> Endpoint:
    created = actor.client.post("/api/v1/endpoints", {"url": url}, format="json")
    endpoint = Endpoint.objects.get(pk=created.json()["id"])
    actor.client.post("/api/v1/events", {"type": "a.b", "data": {"n": 1}}, format="json")
    event = Delivery.objects.get(endpoint=endpoint).event
    pending_backlog(endpoint=endpoint, event=event, rows=rows, due=due)
    return endpoint


def timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started, time.time()


def test_deactivating_mid_stream_stops_sends_at_once_and_parks_the_rest(
    alice, homing, receiver_factory
):
    receiver = receiver_factory(lambda request, n: Answer(delay=0.05))
    endpoint = sending_backlog(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    receiver.wait_for(100, timeout=60)  # the worker is sending the backlog

    response, took, answered_at = timed(
        lambda: alice.client.patch(
            f"/api/v1/endpoints/{endpoint.id}", {"is_active": False}, format="json"
        )
    )
    in_flight = Delivery.objects.filter(endpoint=endpoint, status="delivering").count()
    assert response.status_code == 200
    assert took < ANSWERS_WITHIN, f"PATCH took {took:.2f}s"

    unfinished = Delivery.objects.filter(endpoint=endpoint, status__in=["pending", "delivering"])
    wait_until(lambda: not unfinished.exists(), timeout=120, message="backlog not parked")
    late = [r for r in receiver.requests if r.at > answered_at]
    assert len(late) <= in_flight, f"{len(late)} sent after the PATCH, {in_flight} in flight"
    succeeded = Delivery.objects.filter(endpoint=endpoint, status="succeeded").count()
    assert len(receiver.requests) == succeeded  # each sent once
    parked = DeadLetter.objects.filter(endpoint=endpoint, reason="endpoint deactivated")
    assert parked.count() == BACKLOG + 1 - succeeded


def test_deleting_mid_stream_answers_204_hides_it_and_removes_everything(
    alice, homing, receiver_factory
):
    receiver = receiver_factory()
    endpoint = sending_backlog(alice, receiver.url)
    worker = homing("worker")
    homing("scheduler")
    receiver.wait_for(200, timeout=60)  # the worker is sending and recording

    response, took, answered_at = timed(
        lambda: alice.client.delete(f"/api/v1/endpoints/{endpoint.id}")
    )
    in_flight = Delivery.objects.filter(endpoint=endpoint, status="delivering").count()
    assert response.status_code == 204
    assert took < ANSWERS_WITHIN, f"DELETE took {took:.2f}s"
    assert alice.client.get(f"/api/v1/endpoints/{endpoint.id}").status_code == 404

    wait_until(
        lambda: not Endpoint.all_objects.filter(pk=endpoint.id).exists(),
        timeout=120,
        message="endpoint not removed",
    )
    assert not Delivery.objects.filter(endpoint_id=endpoint.id).exists()
    late = [r for r in receiver.requests if r.at > answered_at]
    assert len(late) <= in_flight, f"{len(late)} sent after the DELETE, {in_flight} in flight"
    log = worker.log()
    assert "ForeignKeyViolation" not in log and "IntegrityError" not in log, log[-3000:]


def test_a_deactivation_whose_job_never_ran_is_parked_by_the_scheduler(alice, homing):
    # No worker: the job's Celery message is never taken (as if its worker was killed).
    endpoint = sending_backlog(alice, "http://127.0.0.1:9/x", rows=5_000)
    response = alice.client.patch(
        f"/api/v1/endpoints/{endpoint.id}", {"is_active": False}, format="json"
    )
    assert response.status_code == 200
    assert Delivery.objects.filter(endpoint=endpoint, status="pending").count() == 5_001

    homing("scheduler")
    pending = Delivery.objects.filter(endpoint=endpoint, status="pending")
    wait_until(lambda: not pending.exists(), timeout=60, message="the scheduler parked nothing")
    assert DeadLetter.objects.filter(endpoint=endpoint).count() == 5_001
