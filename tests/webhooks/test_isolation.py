"""Alice owns every object here; Bob, with a valid key of his own, must never reach them."""

from __future__ import annotations

import pytest


@pytest.fixture
def alices_objects(alice):
    endpoint = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/a"}, format="json"
    ).json()
    event = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    return {"endpoint": endpoint["id"], "event": event["id"]}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/endpoints/{endpoint}"),
        ("patch", "/api/v1/endpoints/{endpoint}"),
        ("delete", "/api/v1/endpoints/{endpoint}"),
        ("post", "/api/v1/endpoints/{endpoint}/rotate-secret"),
        ("get", "/api/v1/events/{event}"),
    ],
)
def test_another_tenants_id_answers_404_like_a_missing_one(alices_objects, bob, method, path):
    theirs = getattr(bob.client, method)(path.format(**alices_objects), {}, format="json")
    missing = getattr(bob.client, method)(
        path.format(endpoint="ep_x", event="evt_x"), {}, format="json"
    )
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()


def test_lists_show_only_the_callers_objects(alices_objects, bob):
    assert bob.client.get("/api/v1/endpoints").json()["results"] == []
    assert bob.client.get("/api/v1/events").json()["results"] == []


def test_bobs_events_never_go_to_alices_endpoints(alices_objects, bob):
    event = bob.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    assert event["deliveries"] == []


def test_bob_cannot_change_alices_endpoint(alices_objects, alice, bob):
    bob.client.patch(
        f"/api/v1/endpoints/{alices_objects['endpoint']}", {"description": "pwned"}, format="json"
    )
    bob.client.delete(f"/api/v1/endpoints/{alices_objects['endpoint']}")
    mine = alice.client.get(f"/api/v1/endpoints/{alices_objects['endpoint']}").json()
    assert mine["description"] == ""
