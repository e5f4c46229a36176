"""POST /endpoints/{id}/recover {since, until?}: replay what died in a window."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.factories import dead_letter_via_api, endpoint_id_via_api
from tests.jobs import run_replay_jobs


def recover(actor, endpoint, **window):
    body = {key: value.isoformat() for key, value in window.items()}
    return actor.client.post(f"/api/v1/endpoints/{endpoint}/recover", body, format="json")


def died_at(letter: DeadLetter, moment) -> DeadLetter:
    DeadLetter.objects.filter(pk=letter.pk).update(dead_at=moment)
    return letter


def test_recover_replays_exactly_the_dead_deliveries_of_the_window(alice):
    endpoint, other = endpoint_id_via_api(alice), endpoint_id_via_api(alice)
    now = timezone.now()
    before = died_at(dead_letter_via_api(alice, endpoint), now - timedelta(hours=5))
    inside = [
        died_at(dead_letter_via_api(alice, endpoint), now - timedelta(hours=h)) for h in (3, 2)
    ]
    after = died_at(dead_letter_via_api(alice, endpoint), now - timedelta(minutes=30))
    elsewhere = died_at(dead_letter_via_api(alice, other), now - timedelta(hours=2))

    response = recover(
        alice, endpoint, since=now - timedelta(hours=4), until=now - timedelta(hours=1)
    )
    assert response.status_code == 202
    assert response.json() == {"replayed": 2}
    run_replay_jobs()

    status = {
        letter.pk: Delivery.objects.get(pk=letter.delivery_id).status
        for letter in [before, *inside, after, elsewhere]
    }
    assert [status[letter.pk] for letter in inside] == ["pending", "pending"]
    assert {status[letter.pk] for letter in [before, after, elsewhere]} == {"dead"}
    replayed = Delivery.objects.get(pk=inside[0].delivery_id)
    assert replayed.sequence == 2  # a replay keeps its number (the second delivery)


def test_recover_without_until_runs_to_now(alice):
    endpoint = endpoint_id_via_api(alice)
    recent = dead_letter_via_api(alice, endpoint)
    response = recover(alice, endpoint, since=timezone.now() - timedelta(days=1))
    assert response.json() == {"replayed": 1}
    run_replay_jobs()
    assert Delivery.objects.get(pk=recent.delivery_id).status == "pending"


def test_recover_refuses_a_bad_window_and_another_tenants_endpoint(alice, bob):
    endpoint = endpoint_id_via_api(alice)
    now = timezone.now()
    backwards = recover(alice, endpoint, since=now, until=now - timedelta(hours=1))
    assert backwards.status_code == 400 and "until" in backwards.json()["errors"]
    missing = alice.client.post(f"/api/v1/endpoints/{endpoint}/recover", {}, format="json")
    assert missing.status_code == 400 and "since" in missing.json()["errors"]
    assert recover(bob, endpoint, since=now).status_code == 404


def test_recover_on_a_deactivated_endpoint_says_to_activate_it(alice):
    endpoint = endpoint_id_via_api(alice)
    dead_letter_via_api(alice, endpoint)
    alice.client.patch(f"/api/v1/endpoints/{endpoint}", {"is_active": False}, format="json")
    response = recover(alice, endpoint, since=timezone.now() - timedelta(days=1))
    assert response.status_code == 409
    assert "activate" in response.json()["message"]
