"""Backpressure beyond POST /events (CONTRACT section 2): test events, retries, replays and
recovers count against the tenant's backlog like events do. Carol, a customer of Alice
holding a consumer key or a portal session, must not fill Alice's backlog through them
and lock Alice's own events out; at a full backlog each answers 429 and creates nothing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries.intake import backpressure
from deliveries.models import Delivery
from dlq.models import DeadLetter, ReplayJob
from dlq.services import replay_jobs
from dlq.services.replay_jobs import replay_job_create, replay_job_run
from tests.factories import (
    api_client_for,
    consumer_key_via_api,
    dead_letter_of,
    delivery_of,
    event_via_api,
    portal_csrf_of,
    portal_link_via_api,
    portal_session_via_link,
)
from webhooks.models import Event
from webhooks.services import tenants

URL = "http://127.0.0.1:9/hooks"


@pytest.fixture(autouse=True)
def _fresh_limits():
    backpressure.rate_forget()
    backpressure.backlog_forget()
    tenants._recent_keys.clear()
    yield
    backpressure.rate_forget()
    backpressure.backlog_forget()


@pytest.fixture
def full(alice, settings):
    """Carol's endpoint with two dead letters, a succeeded delivery and one pending: the
    pending one fills Alice's backlog of 1."""
    endpoint = alice.client.post(
        "/api/v1/endpoints", {"url": URL, "owner": "carol"}, format="json"
    ).json()["id"]
    letters = [
        dead_letter_of(delivery_of(event_via_api(alice, "order.paid")), "HTTP 404")
        for _ in range(2)
    ]
    succeeded = delivery_of(event_via_api(alice, "order.paid")).pk
    Delivery.objects.filter(pk=succeeded).update(status="succeeded", next_attempt_at=None)
    event_via_api(alice, "order.paid")  # pending
    settings.HOMING_TENANT_MAX_BACKLOG = 1
    backpressure.backlog_forget()
    return {"endpoint": endpoint, "letters": letters, "succeeded": succeeded}


def _state():
    """What any of these requests would create or change."""
    return (
        Event.objects.count(),
        sorted(Delivery.objects.values_list("id", "status", "attempt_count")),
        sorted(DeadLetter.objects.values_list("id", "replayed_at")),
        ReplayJob.objects.count(),
    )


def _requests(full):
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    return [
        (f"/api/v1/endpoints/{full['endpoint']}/test", {}),
        (f"/api/v1/deliveries/{full['succeeded']}/retry", {}),
        (f"/api/v1/dead-letters/{full['letters'][0].id}/replay", {}),
        ("/api/v1/dead-letters/replay", {}),
        (f"/api/v1/endpoints/{full['endpoint']}/recover", {"since": since}),
    ]


@pytest.mark.parametrize("who", ["tenant key", "consumer key"])
def test_at_a_full_backlog_each_answers_429_and_creates_nothing(alice, full, who):
    client = (
        alice.client
        if who == "tenant key"
        else api_client_for(consumer_key_via_api(alice, "carol"))
    )
    before = _state()
    for path, body in _requests(full):
        response = client.post(path, body, format="json")
        assert response.status_code == 429, (path, response.content)
        assert response.json()["code"] == "backlog_full"
        assert response["Retry-After"].isdigit()
    assert _state() == before


def test_once_there_is_room_they_are_accepted_again(alice, full, settings):
    settings.HOMING_TENANT_MAX_BACKLOG = 100
    backpressure.backlog_forget()
    for path, body in _requests(full):
        response = alice.client.post(path, body, format="json")
        assert response.status_code == 202, (path, response.content)


def test_in_the_portal_too(alice, full):
    carol, answer = portal_session_via_link(portal_link_via_api(alice, "carol"))
    assert answer.status_code == 302
    page = f"/portal/endpoints/{full['endpoint']}/"
    token = portal_csrf_of(carol.get(page))
    since = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    before = _state()
    posts = [
        (f"{page}action", {"action": "test"}),
        (f"/portal/deliveries/{full['succeeded']}/retry", {}),
        (f"/portal/dead-letters/{full['letters'][0].id}/replay", {}),
        (f"{page}recover", {"since": since}),
    ]
    for path, form in posts:
        response = carol.post(path, {**form, "portal_csrf": token})
        assert response.status_code == 429, path
        assert "unfinished deliveries" in response.content.decode()
    assert _state() == before


def test_a_bulk_replay_job_pauses_at_a_full_backlog_and_fails_no_row(
    alice, full, settings, monkeypatch, django_capture_on_commit_callbacks
):
    published = []
    monkeypatch.setattr(
        replay_jobs,
        "replay_job_publish",
        lambda *, job_id, countdown=None: published.append((job_id, countdown)),
    )
    settings.HOMING_TENANT_MAX_BACKLOG = 2  # room for one of the two letters
    backpressure.backlog_forget()
    with django_capture_on_commit_callbacks(execute=True):
        job = replay_job_create(criteria={"tenant": alice.tenant.pk})
    published.clear()

    with django_capture_on_commit_callbacks(execute=True):
        replay_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.done, job.replayed) == ("running", 1, 1)
    assert published == [(job.pk, replay_jobs.PAUSE_SECONDS)]  # it comes back later
    waiting = [letter for letter in full["letters"] if not _replayed(letter)]
    assert len(waiting) == 1

    # Still full: the job waits again and changes nothing.
    with django_capture_on_commit_callbacks(execute=True):
        replay_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.done) == ("running", 1) and len(published) == 2

    # Deliveries finish: the job carries on where it stopped and finishes.
    Delivery.objects.filter(status="pending").update(status="succeeded", next_attempt_at=None)
    backpressure.backlog_forget()
    replay_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.done, job.replayed) == ("finished", 2, 2)
    assert all(_replayed(letter) for letter in full["letters"])


def _replayed(letter: DeadLetter) -> bool:
    return DeadLetter.objects.get(pk=letter.pk).replayed_at is not None
