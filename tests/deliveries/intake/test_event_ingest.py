from __future__ import annotations

import json

import pytest

from deliveries.models import Delivery
from tests.factories import endpoint_id_via_api
from webhooks.models import Event


def post_event(actor, payload, **headers):
    return actor.client.post(
        "/api/v1/events", json.dumps(payload), content_type="application/json", **headers
    )


def test_it_accepts_an_event_with_one_delivery_per_matching_endpoint(alice):
    everything = endpoint_id_via_api(alice)
    orders = endpoint_id_via_api(alice, event_types=["order.*"])
    exact = endpoint_id_via_api(alice, event_types=["order.paid"])
    endpoint_id_via_api(alice, event_types=["invoice.*", "order.refunded"])
    endpoint_id_via_api(alice, is_active=False)

    response = post_event(alice, {"type": "order.paid", "data": {"amount": 100}})

    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"id", "type", "data", "ordering_key", "created_at", "deliveries"}
    assert body["ordering_key"] is None
    assert body["type"] == "order.paid" and body["data"] == {"amount": 100}
    assert {d["endpoint_id"] for d in body["deliveries"]} == {everything, orders, exact}
    assert all(d["status"] == "pending" for d in body["deliveries"])
    rows = Delivery.objects.filter(event_id=body["id"])
    assert rows.count() == 3
    assert all(row.next_attempt_at is not None for row in rows)


def test_prefix_patterns_do_not_match_a_bare_prefix(alice):
    endpoint_id_via_api(alice, event_types=["order.*"])
    assert post_event(alice, {"type": "order", "data": {}}).json()["deliveries"] == []
    assert len(post_event(alice, {"type": "order.a.b", "data": {}}).json()["deliveries"]) == 1


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("not json", "JSON"),
        ("[1, 2]", "non_field_errors"),
        (json.dumps({"data": {}}), "type"),
        (json.dumps({"type": "a.b"}), "data"),
        (json.dumps({"type": "a.b", "data": [1]}), "data"),
        (json.dumps({"type": "", "data": {}}), "type"),
        (json.dumps({"type": "has space", "data": {}}), "type"),
        (json.dumps({"type": "x" * 256, "data": {}}), "type"),
        (json.dumps({"type": 5, "data": {}}), "type"),
    ],
)
def test_it_refuses_malformed_events_and_writes_nothing(alice, raw, needle):
    endpoint_id_via_api(alice)
    response = alice.client.post("/api/v1/events", raw, content_type="application/json")
    assert response.status_code == 400
    assert needle in response.content.decode()
    assert Event.objects.count() == 0 and Delivery.objects.count() == 0


def test_it_refuses_bodies_over_the_limit_with_413(alice, settings):
    settings.HOMING_MAX_PAYLOAD_BYTES = 1000
    response = post_event(alice, {"type": "a.b", "data": {"blob": "x" * 1000}})
    assert response.status_code == 413
    assert "1000 bytes" in response.json()["message"]
    assert Event.objects.count() == 0
    assert post_event(alice, {"type": "a.b", "data": {"blob": "x" * 900}}).status_code == 202


def test_it_lists_events_newest_first_and_filters_by_type(alice):
    first = post_event(alice, {"type": "a.one", "data": {}}).json()["id"]
    second = post_event(alice, {"type": "a.two", "data": {}}).json()["id"]
    third = post_event(alice, {"type": "a.one", "data": {}}).json()["id"]
    listed = alice.client.get("/api/v1/events").json()
    assert [e["id"] for e in listed["results"]] == [third, second, first]
    filtered = alice.client.get("/api/v1/events?type=a.one").json()
    assert [e["id"] for e in filtered["results"]] == [third, first]


def test_event_detail_shows_its_deliveries(alice):
    endpoint = endpoint_id_via_api(alice)
    event = post_event(alice, {"type": "a.b", "data": {"k": "v"}}).json()
    detail = alice.client.get(f"/api/v1/events/{event['id']}").json()
    assert detail["data"] == {"k": "v"}
    assert detail["deliveries"] == [
        {
            "id": event["deliveries"][0]["id"],
            "endpoint_id": endpoint,
            "sequence": 1,
            "status": "pending",
        }
    ]


def test_an_unknown_event_id_is_a_json_404(alice):
    response = alice.client.get("/api/v1/events/evt_nope")
    assert response.status_code == 404
    assert response.json()["message"]
