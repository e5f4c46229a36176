"""The catch-up feed: GET /endpoints/{id}/messages?after=N&limit=L."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deliveries import selectors
from deliveries.models import Delivery
from dlq.services.retention import retention_purge
from tests.factories import endpoint_id_via_api, event_aged


def post(actor, n, event_type="order.paid"):
    return actor.client.post(
        "/api/v1/events", {"type": event_type, "data": {"n": n}}, format="json"
    ).json()


def feed(actor, endpoint, **query):
    return actor.client.get(f"/api/v1/endpoints/{endpoint}/messages", query)


def test_the_feed_lists_every_delivery_after_a_sequence_in_order(alice):
    endpoint = endpoint_id_via_api(alice)
    events = [post(alice, n) for n in range(5)]
    Delivery.objects.filter(event_id=events[1]["id"]).update(status="dead", next_attempt_at=None)
    Delivery.objects.filter(event_id=events[2]["id"]).update(
        status="succeeded", next_attempt_at=None
    )

    page = feed(alice, endpoint, after=1).json()

    assert [m["sequence"] for m in page["results"]] == [2, 3, 4, 5]
    assert [m["status"] for m in page["results"]][:2] == ["dead", "succeeded"]
    first = page["results"][0]
    delivery = Delivery.objects.get(event_id=events[1]["id"])
    assert first == {
        "sequence": 2,
        "event_id": events[1]["id"],
        "type": "order.paid",
        "created_at": events[1]["created_at"],
        "ordering_key": None,
        "data": {"n": 1},
        "delivery_id": delivery.id,
        "status": "dead",
    }
    assert (page["next_after"], page["done"]) == (5, True)


def test_following_next_after_visits_each_message_once_and_ends(alice):
    endpoint = endpoint_id_via_api(alice)
    alice.client.post(
        "/api/v1/events/batch",
        {"events": [{"type": "a.b", "data": {"n": n}} for n in range(23)]},
        format="json",
    )
    seen, after, pages = [], 0, 0
    while True:
        page = feed(alice, endpoint, after=after, limit=5).json()
        pages += 1
        seen += [m["data"]["n"] for m in page["results"]]
        after = page["next_after"]
        if page["done"]:
            break
    assert seen == list(range(23))
    assert pages == 5
    # Past the end: nothing, and `next_after` stays where it was asked.
    assert feed(alice, endpoint, after=23).json() == {
        "results": [],
        "next_after": 23,
        "done": True,
    }


def test_the_feed_reads_through_the_sequence_index_not_the_backlog(alice):
    endpoint = endpoint_id_via_api(alice)
    alice.client.post(
        "/api/v1/events/batch",
        {"events": [{"type": "a.b", "data": {}} for _ in range(50)]},
        format="json",
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE deliveries_delivery")
    with CaptureQueriesContext(connection) as queries:
        assert feed(alice, endpoint, after=40).status_code == 200
    head = next(q["sql"] for q in queries if "octet_length" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # as on a large table:
        cursor.execute("SET enable_sort = off")  # no sorting a whole backlog either
        cursor.execute("EXPLAIN " + head)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "delivery_endpoint_sequence" in plan


def test_a_page_stops_at_its_byte_budget_but_always_moves_on(alice, monkeypatch):
    monkeypatch.setattr(selectors, "FEED_MAX_BYTES", 3000)
    endpoint = endpoint_id_via_api(alice)
    for n in range(4):
        alice.client.post(
            "/api/v1/events", {"type": "a.b", "data": {"n": n, "pad": "x" * 1200}}, format="json"
        )
    first = feed(alice, endpoint, after=0, limit=100).json()
    assert [m["sequence"] for m in first["results"]] == [1, 2]
    assert (first["next_after"], first["done"]) == (2, False)

    monkeypatch.setattr(selectors, "FEED_MAX_BYTES", 10)  # smaller than one message
    one = feed(alice, endpoint, after=2).json()
    assert [m["sequence"] for m in one["results"]] == [3]


def test_a_page_of_compressible_events_stays_within_its_byte_budget(alice, settings):
    # 200 KB of one repeated character is stored compressed in a few KB: weighed by its
    # stored size, all 25 events (5 MB) came in one page.
    settings.HOMING_MAX_PAYLOAD_BYTES = 300_000
    endpoint = endpoint_id_via_api(alice)
    events = [{"type": "a.b", "data": {"n": n, "blob": "a" * 200_000}} for n in range(25)]
    assert (
        alice.client.post("/api/v1/events/batch", {"events": events}, format="json").status_code
        == 202
    )
    assert selectors.FEED_MAX_BYTES == 4 * 1024 * 1024  # CONTRACT: "pass 4 MiB as sent"

    seen, after = [], 0
    while True:
        answer = feed(alice, endpoint, after=after, limit=500)
        page = answer.json()
        sent = sum(len(json.dumps(m["data"], separators=(",", ":"))) for m in page["results"])
        assert sent <= selectors.FEED_MAX_BYTES
        assert len(answer.content) < selectors.FEED_MAX_BYTES + 64 * 1024
        seen += [m["data"]["n"] for m in page["results"]]
        after = page["next_after"]
        if page["done"]:
            break
    assert seen == list(range(25))


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"after": "-1"}, "after"),
        ({"after": "x"}, "after"),
        ({"after": "²"}, "after"),
        ({"after": "\x00"}, "after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "1.5"}, "limit"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(alice, query, field):
    endpoint = endpoint_id_via_api(alice)
    response = feed(alice, endpoint, **query)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_another_tenants_endpoint_is_not_found(alice, bob):
    endpoint = endpoint_id_via_api(alice)
    post(alice, 1)
    assert feed(bob, endpoint).status_code == 404
    assert feed(bob, "ep_nope").status_code == 404
    assert feed(alice, endpoint).status_code == 200


def test_after_retention_the_feed_answers_410_with_the_oldest_sequence(alice, settings):
    endpoint = endpoint_id_via_api(alice)
    events = [post(alice, n) for n in range(4)]
    Delivery.objects.filter(endpoint_id=endpoint).update(status="succeeded", next_attempt_at=None)
    for event in events[:2]:
        event_aged(event["id"], days=60)
    settings.HOMING_RETENTION = 30 * 24 * 3600

    assert retention_purge().deliveries == 2

    expired = feed(alice, endpoint, after=0)
    assert expired.status_code == 410
    assert expired.json()["oldest_sequence"] == 3
    assert expired.json()["message"]
    assert feed(alice, endpoint, after=1).status_code == 410
    rest = feed(alice, endpoint, after=2).json()
    assert [m["sequence"] for m in rest["results"]] == [3, 4]
