"""Bulk replays run as a background job, a batch per transaction, resumable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries.models import Delivery
from dlq.models import ReplayJob
from dlq.services import replay_jobs
from dlq.services.replay import NotReplayable, dead_letter_replay
from dlq.services.replay_jobs import (
    replay_job_create,
    replay_job_run,
    replay_job_run_batch,
    replay_jobs_resume,
)
from tests.factories import dead_letter_via_api, endpoint_id_via_api
from tests.jobs import replays_at_once


def test_bulk_replay_answers_with_the_count_and_replays_nothing_yet(alice):
    endpoint = endpoint_id_via_api(alice)
    letters = [dead_letter_via_api(alice, endpoint) for _ in range(4)]

    response = alice.client.post("/api/v1/dead-letters/replay", {}, format="json")

    assert response.status_code == 202 and response.json() == {"replayed": 4}
    job = ReplayJob.objects.get()
    assert (job.status, job.total, job.done) == ("running", 4, 0)
    assert all(Delivery.objects.get(pk=d.delivery_id).status == "dead" for d in letters)


def test_a_job_works_in_batches_and_saves_its_progress(alice, monkeypatch):
    monkeypatch.setattr(replay_jobs, "REPLAY_BATCH", 2)
    endpoint = endpoint_id_via_api(alice)
    letters = [dead_letter_via_api(alice, endpoint) for _ in range(5)]
    job = replay_job_create(criteria={"tenant": alice.tenant.pk})

    assert replay_job_run_batch(job_id=job.pk) is True
    job.refresh_from_db()
    assert (job.done, job.replayed, job.percent) == (2, 2, 40)
    # The process "dies" here; running the job again carries on from its cursor.
    replay_job_run(job_id=job.pk)

    job.refresh_from_db()
    assert (job.status, job.done, job.replayed, job.percent) == ("finished", 5, 5, 100)
    assert all(Delivery.objects.get(pk=d.delivery_id).status == "pending" for d in letters)


def test_a_job_is_finished_by_its_last_batch_not_a_later_empty_one(alice, monkeypatch):
    monkeypatch.setattr(replay_jobs, "REPLAY_BATCH", 2)
    endpoint = endpoint_id_via_api(alice)
    for _ in range(3):
        dead_letter_via_api(alice, endpoint)
    job = replay_job_create(criteria={"tenant": alice.tenant.pk})

    assert replay_job_run_batch(job_id=job.pk) is True  # 2 of 3
    assert replay_job_run_batch(job_id=job.pk) is False  # the last one, short: finished
    job.refresh_from_db()
    # Progress and status change together: never "3 of 3 handled" while still running.
    assert (job.status, job.done, job.replayed, job.percent) == ("finished", 3, 3, 100)
    assert job.finished_at is not None


def test_a_job_leaves_out_letters_that_died_after_it_was_asked_for(alice):
    endpoint = endpoint_id_via_api(alice)
    before = dead_letter_via_api(alice, endpoint)
    job = replay_job_create(criteria={"tenant": alice.tenant.pk})
    after = dead_letter_via_api(alice, endpoint)
    replay_job_run(job_id=job.pk)
    assert Delivery.objects.get(pk=before.delivery_id).status == "pending"
    assert Delivery.objects.get(pk=after.delivery_id).status == "dead"


def test_nothing_to_replay_makes_a_finished_job(alice):
    job = replay_job_create(criteria={"tenant": alice.tenant.pk})
    assert (job.status, job.total, job.percent) == ("finished", 0, 100)


def test_a_stalled_job_is_published_again(alice, monkeypatch):
    published: list[str] = []
    monkeypatch.setattr(replay_jobs, "replay_job_publish", lambda job_id: published.append(job_id))
    dead_letter_via_api(alice, endpoint_id_via_api(alice))
    job = replay_job_create(criteria={"tenant": alice.tenant.pk})
    assert replay_jobs_resume() == 0
    ReplayJob.objects.filter(pk=job.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert replay_jobs_resume() == 1 and published == [job.pk]
    assert replay_jobs_resume() == 0  # touched: the next poller does not publish it again


def test_replay_of_a_delivery_already_pending_is_refused_and_changes_nothing(alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    Delivery.objects.filter(pk=letter.delivery_id).update(status="succeeded", next_attempt_at=None)
    with pytest.raises(NotReplayable, match="already succeeded"):
        dead_letter_replay(dead_letter=letter)
    letter.refresh_from_db()
    assert letter.replayed_at is None
    assert Delivery.objects.get(pk=letter.delivery_id).status == "succeeded"


def test_the_api_refuses_a_replay_of_a_delivery_already_pending(alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    alice.client.post(f"/api/v1/deliveries/{letter.delivery_id}/retry")
    response = alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay")
    assert response.status_code == 409
    assert "already pending" in response.json()["message"]
    letter.refresh_from_db()
    assert letter.replayed_at is None


@pytest.mark.django_db(transaction=True)
def test_two_staff_replaying_one_letter_at_once_make_one_replay(alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    assert replays_at_once(letter) == ["refused", "replayed"]
    delivery = Delivery.objects.get(pk=letter.delivery_id)
    assert delivery.status == "pending" and delivery.attempts_in_schedule == 0
