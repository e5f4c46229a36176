"""Discarding dead letters through the API and the service."""

from __future__ import annotations

from deliveries.models import Delivery
from dlq.models import DeadLetter
from dlq.services import discard
from dlq.services.discard import NotDiscardable, dead_letter_discard, dead_letters_discard
from tests.factories import dead_letter_via_api, endpoint_id_via_api


def test_it_discards_one_dead_letter_and_the_delivery_stays_dead(alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))

    response = alice.client.delete(f"/api/v1/dead-letters/{letter.id}")

    assert response.status_code == 204 and response.content == b""
    letter.refresh_from_db()
    assert letter.discarded_at is not None and letter.replayed_at is None
    assert Delivery.objects.get(pk=letter.delivery_id).status == "dead"
    assert alice.client.get("/api/v1/dead-letters").json()["results"] == []
    # It left the queue: a second discard or a replay cannot find it.
    assert alice.client.delete(f"/api/v1/dead-letters/{letter.id}").status_code == 404
    assert alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay").status_code == 404


def test_bob_cannot_discard_alices_dead_letter(alice, bob):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    assert bob.client.delete(f"/api/v1/dead-letters/{letter.id}").status_code == 404
    assert bob.client.post(
        "/api/v1/dead-letters/discard", {"ids": [letter.id]}, format="json"
    ).json() == {"discarded": 0}
    letter.refresh_from_db()
    assert letter.discarded_at is None


def test_it_discards_in_bulk_by_filter(alice):
    first, second = endpoint_id_via_api(alice), endpoint_id_via_api(alice)
    paid = [dead_letter_via_api(alice, first, "order.paid") for _ in range(3)]
    kept = [
        dead_letter_via_api(alice, second, "order.paid"),
        dead_letter_via_api(alice, first, "x.y"),
    ]

    response = alice.client.post(
        "/api/v1/dead-letters/discard",
        {"endpoint": first, "event_type": "order.paid"},
        format="json",
    )

    assert response.status_code == 200 and response.json() == {"discarded": 3}
    listed = {item["id"] for item in alice.client.get("/api/v1/dead-letters").json()["results"]}
    assert listed == {letter.id for letter in kept}
    assert all(Delivery.objects.get(pk=letter.delivery_id).status == "dead" for letter in paid)


def test_bulk_discard_refuses_a_bad_filter(alice):
    response = alice.client.post("/api/v1/dead-letters/discard", {"ids": "nope"}, format="json")
    assert response.status_code == 400 and "ids" in response.content.decode()


def test_bulk_discard_works_in_small_batches(alice, monkeypatch):
    monkeypatch.setattr(discard, "DISCARD_BATCH", 2)
    endpoint = endpoint_id_via_api(alice)
    for _ in range(5):
        dead_letter_via_api(alice, endpoint)
    assert dead_letters_discard(criteria={"tenant": alice.tenant.pk}) == 5
    assert not DeadLetter.objects.filter(discarded_at__isnull=True).exists()


def test_a_second_discard_of_the_same_letter_is_told(alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    dead_letter_discard(dead_letter=letter)
    try:
        dead_letter_discard(dead_letter=letter)
    except NotDiscardable as error:
        assert "already discarded" in error.message
    else:
        raise AssertionError("a second discard must be refused")
