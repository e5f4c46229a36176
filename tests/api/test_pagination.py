"""Keyset pagination: `next` visits every item once and ends, whatever the timestamps."""

from __future__ import annotations

import base64
import json

import pytest
from django.utils import timezone

from core.ids import new_id
from deliveries.intake.sequences import sequences_take
from deliveries.models import Delivery
from dlq.models import DeadLetter
from webhooks.models import Event


def walk(client, url):
    seen, pages = [], 0
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        seen += [item["id"] for item in body["results"]]
        url = body["next"]
        pages += 1
        assert pages < 100, "next never ends"
    return seen


def test_walking_2000_events_with_one_timestamp_sees_each_once(alice):
    same_time = timezone.now()
    Event.objects.bulk_create(
        Event(id=new_id("evt"), tenant=alice.tenant, type="a.b", data={}) for _ in range(2000)
    )
    Event.objects.update(created_at=same_time)  # auto_now_add would have set each its own

    seen = walk(alice.client, "/api/v1/events?limit=250")

    assert len(seen) == 2000 and len(set(seen)) == 2000
    assert seen == sorted(seen, reverse=True)  # newest first: the id breaks ties


def test_newer_items_come_first_and_new_ones_do_not_repeat_old_ones(alice):
    first = [Event.objects.create(tenant=alice.tenant, type="a.b", data={}).id for _ in range(5)]
    page = alice.client.get("/api/v1/events?limit=2").json()
    assert [e["id"] for e in page["results"]] == first[::-1][:2]
    Event.objects.create(tenant=alice.tenant, type="a.b", data={})  # arrives mid-walk
    rest = walk(alice.client, page["next"])
    assert rest == first[::-1][2:]


def _token(value):
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!!",
        "eyJhIjoi",  # truncated base64 JSON
        _token({"a": 1}),
        _token(["not a time", "evt_1"]),
        _token(["2026-11-23T10:00:00", "evt_1"]),  # no time zone
        _token(["2026-11-23T10:00:00+00:00", 5]),
        _token(["2026-11-23T10:00:00+00:00", "evt\u0000"]),
        _token(["2026-13-45T10:00:00+00:00", "evt_1"]),
    ],
)
@pytest.mark.parametrize(
    "route", ["/api/v1/events", "/api/v1/endpoints", "/api/v1/deliveries", "/api/v1/dead-letters"]
)
def test_a_tampered_cursor_is_a_400(alice, route, cursor):
    response = alice.client.get(route, {"cursor": cursor})
    assert response.status_code == 400
    assert "cursor" in response.json()["message"]


def test_a_bad_limit_is_a_400(alice):
    assert alice.client.get("/api/v1/events?limit=abc").status_code == 400


def test_dead_letters_of_one_deactivation_are_walked_once(alice):
    """A deactivation parks every pending delivery with one dead_at."""
    endpoint = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json"
    ).json()
    event = Event.objects.create(tenant=alice.tenant, type="a.b", data={})
    deliveries = Delivery.objects.bulk_create(
        Delivery(
            id=new_id("dlv"),
            tenant=alice.tenant,
            event=event,
            endpoint_id=endpoint["id"],
            status=Delivery.Status.DEAD,
            sequence=sequence,
        )
        for sequence in sequences_take([endpoint["id"]] * 1200)
    )
    dead_at = timezone.now()
    DeadLetter.objects.bulk_create(
        DeadLetter(
            id=new_id("dl"),
            tenant=alice.tenant,
            delivery=delivery,
            event=event,
            endpoint_id=endpoint["id"],
            event_type="a.b",
            reason="endpoint deactivated",
            dead_at=dead_at,
        )
        for delivery in deliveries
    )

    seen = walk(alice.client, "/api/v1/dead-letters?limit=100")

    assert len(seen) == 1200 and len(set(seen)) == 1200


def test_a_page_of_large_events_stops_at_a_few_mib_and_next_gives_the_rest(alice):
    """250 events of 256 KiB would be 64 MB in one answer: a page is bounded by bytes too."""
    from api.pagination import MAX_PAGE_BYTES

    big = {"blob": "x" * 200_000}
    Event.objects.bulk_create(
        Event(id=new_id("evt"), tenant=alice.tenant, type="a.b", data=big) for _ in range(45)
    )

    first = alice.client.get("/api/v1/events?limit=250")

    assert first.status_code == 200
    assert len(first.content) <= MAX_PAGE_BYTES + 250_000  # one row's worth over, at most
    assert 10 <= len(first.json()["results"]) < 45
    assert first.json()["next"] is not None
    seen = walk(alice.client, "/api/v1/events?limit=250")
    assert len(seen) == 45 and len(set(seen)) == 45


def test_small_events_still_fill_a_page_of_250(alice):
    Event.objects.bulk_create(
        Event(id=new_id("evt"), tenant=alice.tenant, type="a.b", data={"n": n}) for n in range(260)
    )
    page = alice.client.get("/api/v1/events?limit=250").json()
    assert len(page["results"]) == 250 and page["next"] is not None
