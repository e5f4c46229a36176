"""Dead-letter listing and replay through the API (no worker: rows are what we check)."""

from __future__ import annotations

from django.utils import timezone

from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.factories import dead_letter_via_api, endpoint_id_via_api
from tests.jobs import run_replay_jobs


def test_it_lists_dead_letters_with_filters(alice):
    first, second = endpoint_id_via_api(alice), endpoint_id_via_api(alice)
    a = dead_letter_via_api(alice, first, "order.paid")
    b = dead_letter_via_api(alice, second, "invoice.sent")
    listed = alice.client.get("/api/v1/dead-letters").json()["results"]
    assert [item["id"] for item in listed] == [b.id, a.id]
    assert set(listed[0]) == {
        "id",
        "delivery_id",
        "event_id",
        "endpoint_id",
        "event_type",
        "reason",
        "dead_at",
        "replayed_at",
    }
    by_endpoint = alice.client.get(f"/api/v1/dead-letters?endpoint={first}").json()["results"]
    assert [item["id"] for item in by_endpoint] == [a.id]
    by_type = alice.client.get("/api/v1/dead-letters?event_type=invoice.sent").json()["results"]
    assert [item["id"] for item in by_type] == [b.id]
    assert alice.client.get("/api/v1/dead-letters?replayed=true").json()["results"] == []
    waiting = alice.client.get("/api/v1/dead-letters?replayed=false").json()["results"]
    assert [item["id"] for item in waiting] == [b.id, a.id]
    garbled = alice.client.get("/api/v1/dead-letters?replayed=yes")
    assert garbled.status_code == 400 and "replayed" in garbled.json()["errors"]


def test_replay_starts_a_fresh_schedule_and_keeps_the_dead_letter(alice):
    endpoint = endpoint_id_via_api(alice)
    letter = dead_letter_via_api(alice, endpoint)
    response = alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay")
    assert response.status_code == 202
    delivery = Delivery.objects.get(pk=letter.delivery_id)
    assert delivery.status == "pending" and delivery.next_attempt_at is not None
    assert delivery.next_attempt_at <= timezone.now()
    assert delivery.attempts_in_schedule == 0  # the next attempt is attempt 1 of a schedule
    letter.refresh_from_db()
    assert letter.replayed_at is not None
    assert alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay").status_code == 409


def test_bulk_replay_by_filter_replays_only_matching_waiting_letters(alice, bob):
    first, second = endpoint_id_via_api(alice), endpoint_id_via_api(alice)
    paid = [dead_letter_via_api(alice, first, "order.paid") for _ in range(3)]
    other = dead_letter_via_api(alice, second, "order.paid")
    sent = dead_letter_via_api(alice, first, "invoice.sent")
    bobs = dead_letter_via_api(bob, endpoint_id_via_api(bob), "order.paid")

    response = alice.client.post(
        "/api/v1/dead-letters/replay",
        {"endpoint": first, "event_type": "order.paid"},
        format="json",
    )

    assert response.status_code == 202 and response.json() == {"replayed": 3}
    run_replay_jobs()  # what the worker's task does in the background
    replayed = set(
        DeadLetter.objects.filter(replayed_at__isnull=False).values_list("id", flat=True)
    )
    assert replayed == {letter.id for letter in paid}
    assert Delivery.objects.get(pk=other.delivery_id).status == "dead"
    assert Delivery.objects.get(pk=sent.delivery_id).status == "dead"
    assert Delivery.objects.get(pk=bobs.delivery_id).status == "dead"
    by_ids = alice.client.post(
        "/api/v1/dead-letters/replay", {"ids": [other.id, bobs.id]}, format="json"
    )
    assert by_ids.json() == {"replayed": 1}  # Bob's letter is not Alice's to replay


def test_an_inactive_endpoints_letters_wait_until_it_is_active(alice):
    endpoint = endpoint_id_via_api(alice)
    letter = dead_letter_via_api(alice, endpoint)
    alice.client.patch(f"/api/v1/endpoints/{endpoint}", {"is_active": False}, format="json")
    response = alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay")
    assert response.status_code == 409 and "deactivated" in response.json()["message"]
    alice.client.patch(f"/api/v1/endpoints/{endpoint}", {"is_active": True}, format="json")
    assert alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay").status_code == 202


def test_retry_now_gives_a_dead_delivery_one_more_attempt(alice):
    endpoint = endpoint_id_via_api(alice)
    letter = dead_letter_via_api(alice, endpoint)
    response = alice.client.post(f"/api/v1/deliveries/{letter.delivery_id}/retry")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    delivery = Delivery.objects.get(pk=letter.delivery_id)
    assert delivery.next_attempt_at is not None and delivery.next_attempt_at <= timezone.now()


def test_another_tenants_dead_letters_and_deliveries_are_404(alice, bob):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    assert bob.client.get("/api/v1/dead-letters").json()["results"] == []
    assert bob.client.post(f"/api/v1/dead-letters/{letter.id}/replay").status_code == 404
    assert bob.client.get(f"/api/v1/deliveries/{letter.delivery_id}").status_code == 404
    assert bob.client.post(f"/api/v1/deliveries/{letter.delivery_id}/retry").status_code == 404
    assert bob.client.get("/api/v1/deliveries").json()["results"] == []
    assert Delivery.objects.get(pk=letter.delivery_id).status == "dead"
