from __future__ import annotations

from deliveries.models import Delivery


def test_deliveries_are_listed_newest_first_with_filters(alice):
    one = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/a"}, format="json"
    ).json()["id"]
    two = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/b"}, format="json"
    ).json()["id"]
    first = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    second = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    Delivery.objects.filter(event_id=first["id"], endpoint_id=one).update(
        status="succeeded", next_attempt_at=None
    )

    everything = alice.client.get("/api/v1/deliveries").json()["results"]
    assert len(everything) == 4
    assert {d["event_id"] for d in everything[:2]} == {second["id"]}
    assert set(everything[0]) == {
        "id",
        "event_id",
        "endpoint_id",
        "sequence",
        "blocked_by",
        "status",
        "attempt_count",
        "next_attempt_at",
        "last_error",
        "attempts",
    }
    succeeded = alice.client.get("/api/v1/deliveries?status=succeeded").json()["results"]
    assert [(d["event_id"], d["endpoint_id"]) for d in succeeded] == [(first["id"], one)]
    to_two = alice.client.get(f"/api/v1/deliveries?endpoint={two}").json()["results"]
    assert {d["endpoint_id"] for d in to_two} == {two} and len(to_two) == 2
    of_second = alice.client.get(f"/api/v1/deliveries?event={second['id']}").json()["results"]
    assert {d["event_id"] for d in of_second} == {second["id"]} and len(of_second) == 2


def test_an_unknown_delivery_is_404(alice):
    assert alice.client.get("/api/v1/deliveries/dlv_nope").status_code == 404
    assert alice.client.post("/api/v1/deliveries/dlv_nope/retry").status_code == 404
