"""Deactivating or deleting an endpoint answers at once, whatever its backlog; a
background job parks or removes the backlog in batches afterwards, and resumes if killed.

Alice's endpoint has a 50,000-deep backlog (inserted with one SQL statement)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from deliveries.lifecycle import endpoint_backlogs
from deliveries.lifecycle.endpoint_backlogs import (
    endpoint_backlog_clear,
    endpoint_backlogs_waiting,
    endpoint_backlogs_work,
)
from deliveries.lifecycle.interventions import deliveries_kill_for_endpoint
from deliveries.lifecycle.policy import current_policy
from deliveries.models import Attempt, Delivery
from deliveries.worker.claims import deliveries_claim
from deliveries.worker.fair_share import DueEndpoint
from dlq.models import DeadLetter
from tests.backlogs import pending_backlog
from webhooks.models import Endpoint

BACKLOG = 50_000
# Generous for a test machine shared by many: the old request took 8+ s for this backlog.
ANSWERS_WITHIN = 1.0


def make_backlog(actor, *, rows: int = BACKLOG, due: str = "now() + interval '1 day'") -> str:
    """Alice's endpoint with one real event and `rows` pending deliveries of it."""
    created = actor.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/x"}, format="json")
    endpoint = Endpoint.objects.get(pk=created.json()["id"])
    actor.client.post("/api/v1/events", {"type": "a.b", "data": {"n": 1}}, format="json")
    event = Delivery.objects.get(endpoint=endpoint).event
    pending_backlog(endpoint=endpoint, event=event, rows=rows, due=due)
    return endpoint.id


def timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def test_deactivating_with_a_deep_backlog_answers_at_once_and_the_job_parks_it(alice):
    endpoint_id = make_backlog(alice)
    response, took = timed(
        lambda: alice.client.patch(
            f"/api/v1/endpoints/{endpoint_id}", {"is_active": False}, format="json"
        )
    )
    assert response.status_code == 200 and response.json()["is_active"] is False
    assert took < ANSWERS_WITHIN, f"PATCH took {took:.1f}s"
    assert Delivery.objects.filter(endpoint_id=endpoint_id, status="pending").count() == BACKLOG + 1

    assert endpoint_backlog_clear(endpoint_id=endpoint_id)
    assert not Delivery.objects.filter(endpoint_id=endpoint_id, status="pending").exists()
    parked = DeadLetter.objects.filter(endpoint_id=endpoint_id)
    assert parked.count() == BACKLOG + 1
    assert set(parked.values_list("reason", flat=True)) == {"endpoint deactivated"}


def test_deleting_with_a_deep_backlog_answers_at_once_hides_it_and_the_job_removes_it(alice, bob):
    endpoint_id = make_backlog(alice)
    first = Delivery.objects.filter(endpoint_id=endpoint_id).order_by("created_at")[0]
    Attempt.objects.create(delivery=first, number=1, started_at=first.created_at, duration_ms=3)
    deliveries_kill_for_endpoint(endpoint_id=endpoint_id, reason="x")  # active: parks nothing
    bobs = bob.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/b"}, format="json")

    response, took = timed(lambda: alice.client.delete(f"/api/v1/endpoints/{endpoint_id}"))
    assert response.status_code == 204
    assert took < ANSWERS_WITHIN, f"DELETE took {took:.1f}s"
    # Gone for Alice at once, while its rows are still there to be removed.
    assert alice.client.get(f"/api/v1/endpoints/{endpoint_id}").status_code == 404
    assert alice.client.delete(f"/api/v1/endpoints/{endpoint_id}").status_code == 404
    assert alice.client.get("/api/v1/endpoints").json()["results"] == []
    assert Delivery.objects.filter(endpoint_id=endpoint_id).count() == BACKLOG + 1
    assert endpoint_backlogs_waiting() == [endpoint_id]

    assert endpoint_backlog_clear(endpoint_id=endpoint_id)
    assert not Delivery.objects.filter(endpoint_id=endpoint_id).exists()
    assert not Attempt.objects.filter(delivery_id=first.id).exists()
    assert not Endpoint.all_objects.filter(pk=endpoint_id).exists()
    assert endpoint_backlogs_waiting() == []
    # Bob's endpoint is untouched.
    assert bob.client.get(f"/api/v1/endpoints/{bobs.json()['id']}").status_code == 200


def test_a_job_stopped_midway_is_carried_on_by_the_scheduler_sweep(alice):
    endpoint_id = make_backlog(alice, rows=5_000)
    alice.client.patch(f"/api/v1/endpoints/{endpoint_id}", {"is_active": False}, format="json")
    # The task's process dies after a batch or so (its message may be lost too).
    deliveries_kill_for_endpoint(
        endpoint_id=endpoint_id, reason="endpoint deactivated", deadline=time.monotonic() + 0.01
    )
    left = Delivery.objects.filter(endpoint_id=endpoint_id, status="pending").count()
    assert 0 < left < 5_001
    assert endpoint_backlogs_waiting() == [endpoint_id]

    while not endpoint_backlogs_work(time_budget=0.5):  # as the scheduler does, tick by tick
        pass
    assert not Delivery.objects.filter(endpoint_id=endpoint_id, status="pending").exists()
    assert DeadLetter.objects.filter(endpoint_id=endpoint_id).count() == 5_001
    assert endpoint_backlogs_waiting() == []


def test_reactivating_before_the_job_ran_parks_nothing(alice):
    endpoint_id = make_backlog(alice, rows=100)
    url = f"/api/v1/endpoints/{endpoint_id}"
    alice.client.patch(url, {"is_active": False}, format="json")
    alice.client.patch(url, {"is_active": True}, format="json")
    assert endpoint_backlog_clear(endpoint_id=endpoint_id)
    assert Delivery.objects.filter(endpoint_id=endpoint_id, status="pending").count() == 101
    assert not DeadLetter.objects.exists()


def test_claims_leave_a_deactivated_endpoint_alone_even_from_a_stale_due_list(alice):
    endpoint_id = make_backlog(alice, rows=10, due="now()")
    # A worker looked for due endpoints a moment before the deactivation.
    stale = [DueEndpoint(endpoint_id, alice.tenant.id, None)]
    alice.client.patch(f"/api/v1/endpoints/{endpoint_id}", {"is_active": False}, format="json")
    assert deliveries_claim(limit=100, policy=current_policy(), due=stale) == []
    assert deliveries_claim(limit=100, policy=current_policy()) == []


@pytest.mark.django_db(transaction=True)
def test_deleting_while_a_recorder_writes_an_attempt_answers_204_and_loses_nothing(
    alice, postgres_dsn
):
    """The 500 Schemathesis found: the worker recorded an attempt of a delivery that the
    DELETE's cascade had already collected (ForeignKeyViolation at COMMIT)."""
    endpoint_id = make_backlog(alice, rows=2_000)
    recording = Delivery.objects.filter(endpoint_id=endpoint_id).order_by("id")[0]
    with psycopg.connect(postgres_dsn) as recorder:
        # The recorder's transaction: it has updated its delivery (holding the row) and
        # is about to insert the attempt.
        recorder.execute(
            "UPDATE deliveries_delivery SET status = 'pending' WHERE id = %s", [recording.id]
        )
        answers: list[int] = []
        deleting = threading.Thread(
            target=lambda: answers.append(
                alice.client.delete(f"/api/v1/endpoints/{endpoint_id}").status_code
            )
        )
        deleting.start()
        deleting.join(timeout=5)
        assert answers == [204], "DELETE waited for the recorder"

        failures: list[BaseException] = []

        def job() -> None:
            try:
                endpoint_backlog_clear(endpoint_id=endpoint_id)
            except BaseException as exc:
                failures.append(exc)
            finally:
                connection.close()

        worker = threading.Thread(target=job)
        worker.start()
        time.sleep(0.5)  # the job removes everything else and waits for the held row
        recorder.execute(
            "INSERT INTO deliveries_attempt (delivery_id, number, started_at, duration_ms,"
            " error, response_body) VALUES (%s, 1, now(), 5, '', 'ok')",
            [recording.id],
        )
        recorder.commit()
        worker.join(timeout=30)
    assert not worker.is_alive() and failures == []
    assert not Delivery.objects.filter(endpoint_id=endpoint_id).exists()
    assert not Attempt.objects.filter(delivery_id=recording.id).exists()
    assert not Endpoint.all_objects.filter(pk=endpoint_id).exists()


def test_a_task_hands_what_is_left_after_its_time_to_a_new_message(alice, monkeypatch):
    endpoint_id = make_backlog(alice, rows=5_000)
    alice.client.patch(f"/api/v1/endpoints/{endpoint_id}", {"is_active": False}, format="json")
    published: list[str] = []
    monkeypatch.setattr(endpoint_backlogs, "_publish", published.append)
    monkeypatch.setattr(endpoint_backlogs, "TASK_SECONDS", 0.01)
    endpoint_backlogs.endpoint_backlog_run(endpoint_id=endpoint_id)
    assert published == [endpoint_id]
    assert Delivery.objects.filter(endpoint_id=endpoint_id, status="pending").exists()

    monkeypatch.setattr(endpoint_backlogs, "TASK_SECONDS", 60)
    endpoint_backlogs.endpoint_backlog_run(endpoint_id=endpoint_id)  # the next message
    assert published == [endpoint_id]
    assert not Delivery.objects.filter(endpoint_id=endpoint_id, status="pending").exists()
