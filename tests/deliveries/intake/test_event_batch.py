"""POST /api/v1/events/batch: many events, one transaction, all or nothing."""

from __future__ import annotations

import json

import pytest
from rest_framework.renderers import JSONRenderer

from deliveries.api.serializers import EventSerializer
from deliveries.models import Delivery
from tests.factories import endpoint_id_via_api
from webhooks.models import Event, IdempotencyRecord


def post_batch(actor, payload, **headers):
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    return actor.client.post(
        "/api/v1/events/batch", raw, content_type="application/json", **headers
    )


def batch(*types: str) -> dict:
    return {"events": [{"type": t, "data": {"n": n}} for n, t in enumerate(types)]}


def test_it_answers_each_event_as_post_events_does_in_the_order_sent(alice):
    orders = endpoint_id_via_api(alice, event_types=["order.*"])
    everything = endpoint_id_via_api(alice)
    response = post_batch(alice, batch("order.paid", "invoice.sent", "order.refunded"))

    assert response.status_code == 202
    answered = response.json()["events"]
    assert [(e["type"], e["data"]) for e in answered] == [
        ("order.paid", {"n": 0}),
        ("invoice.sent", {"n": 1}),
        ("order.refunded", {"n": 2}),
    ]
    fan_out = [{d["endpoint_id"] for d in e["deliveries"]} for e in answered]
    assert fan_out == [{orders, everything}, {everything}, {orders, everything}]
    assert Delivery.objects.filter(status="pending").count() == 5
    for event in answered:  # byte for byte what the serializer of GET /events/{id} says
        stored = Event.objects.prefetch_related("deliveries").get(pk=event["id"])
        expected = json.loads(JSONRenderer().render(EventSerializer(stored).data))
        expected["deliveries"].sort(key=lambda d: d["id"])
        event["deliveries"].sort(key=lambda d: d["id"])
        assert event == expected


def test_single_and_batch_answers_have_the_same_shape(alice):
    endpoint_id_via_api(alice)
    single = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    [from_batch] = post_batch(alice, batch("a.b")).json()["events"]
    assert (
        list(single)
        == list(from_batch)
        == [
            "id",
            "type",
            "data",
            "ordering_key",
            "created_at",
            "deliveries",
        ]
    )
    assert single["created_at"].endswith("Z") and from_batch["created_at"].endswith("Z")


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"events": [{"type": "a.b", "data": {}}, {"type": "a b", "data": {}}]}, "events[1].type"),
        ({"events": [{"type": "a.b", "data": {}}] * 3 + [{"type": "a.b"}]}, "events[3].data"),
        ({"events": [{"type": "a.b", "data": {}}, "text"]}, "events[1]"),
        ({"events": [{"type": "homing.x", "data": {}}]}, "events[0].type"),
        ({"events": []}, "events"),
        ({"events": {"type": "a.b"}}, "events"),
        ({}, "events"),
        ([{"type": "a.b", "data": {}}], "non_field_errors"),
        ('{"events": [{"type": "a.b", "data": {"x": NaN}}]}', "body"),
    ],
)
def test_one_bad_item_refuses_the_whole_batch_naming_it(alice, payload, field):
    endpoint_id_via_api(alice)
    response = post_batch(alice, payload)
    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == [field]
    assert field in response.json()["message"]
    assert Event.objects.count() == 0 and Delivery.objects.count() == 0


def test_it_refuses_more_events_than_the_limit_naming_it(alice, settings):
    settings.HOMING_MAX_BATCH_EVENTS = 3
    response = post_batch(alice, batch("a.b", "a.b", "a.b", "a.b"))
    assert response.status_code == 400
    assert "HOMING_MAX_BATCH_EVENTS" in response.json()["message"]
    assert Event.objects.count() == 0
    assert post_batch(alice, batch("a.b", "a.b", "a.b")).status_code == 202


def test_an_item_over_the_payload_limit_is_named(alice, settings):
    settings.HOMING_MAX_PAYLOAD_BYTES = 1000
    small = {"type": "a.b", "data": {"blob": "x" * 500}}
    large = {"type": "a.b", "data": {"blob": "é" * 600}}  # 1,200 bytes as UTF-8
    response = post_batch(alice, {"events": [small, small, large]})
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["events[2]"]
    assert "HOMING_MAX_PAYLOAD_BYTES" in response.json()["message"]
    assert Event.objects.count() == 0
    assert post_batch(alice, {"events": [small, small]}).status_code == 202


def test_a_body_over_the_batch_limit_is_413(alice, settings):
    settings.HOMING_MAX_BATCH_BYTES = 2000
    response = post_batch(alice, {"events": [{"type": "a.b", "data": {"b": "x" * 900}}] * 3})
    assert response.status_code == 413
    assert "2000 bytes" in response.json()["message"]
    assert Event.objects.count() == 0


def test_an_idempotency_key_replays_the_whole_batch_byte_for_byte(alice):
    endpoint_id_via_api(alice)
    first = post_batch(alice, batch("a.b", "c.d"), HTTP_IDEMPOTENCY_KEY="import-7")
    again = post_batch(alice, batch("a.b", "c.d"), HTTP_IDEMPOTENCY_KEY="import-7")
    assert first.status_code == again.status_code == 202
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    assert Event.objects.count() == 2 and Delivery.objects.count() == 2

    other = post_batch(alice, batch("a.b"), HTTP_IDEMPOTENCY_KEY="import-7")
    assert other.status_code == 422
    assert Event.objects.count() == 2


def test_a_refused_batch_frees_its_idempotency_key(alice):
    bad = {"events": [{"type": "a.b", "data": {}}, {"type": "", "data": {}}]}
    assert post_batch(alice, bad, HTTP_IDEMPOTENCY_KEY="k1").status_code == 400
    assert IdempotencyRecord.objects.count() == 0
    assert post_batch(alice, batch("a.b"), HTTP_IDEMPOTENCY_KEY="k1").status_code == 202


def test_a_batch_fans_out_to_its_own_tenant_only(alice, bob):
    mine = endpoint_id_via_api(alice)
    endpoint_id_via_api(bob)
    answered = post_batch(alice, batch("a.b", "a.c")).json()["events"]
    assert [[d["endpoint_id"] for d in e["deliveries"]] for e in answered] == [[mine], [mine]]
    assert set(Delivery.objects.values_list("tenant_id", flat=True)) == {alice.tenant.id}
    event_id = answered[0]["id"]
    assert bob.client.get(f"/api/v1/events/{event_id}").status_code == 404
    assert bob.client.get("/api/v1/events").json()["results"] == []


def test_a_batch_needs_an_api_key(client, db):
    response = client.post(
        "/api/v1/events/batch", json.dumps(batch("a.b")), content_type="application/json"
    )
    assert response.status_code == 401
    assert Event.objects.count() == 0


def test_the_schema_documents_the_batch_route(alice):
    schema = alice.client.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/events/batch"]["post"]
    assert "202" in operation["responses"]
