"""An event keeps the W3C trace context it came with: the `traceparent`/`tracestate`
headers of POST /events (and of a batch), or a batch item's own fields."""

from __future__ import annotations

import pytest

from webhooks.models import Endpoint, Event

pytestmark = pytest.mark.django_db

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
ITEM = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


@pytest.fixture
def shop(alice) -> Endpoint:
    return Endpoint.objects.create(tenant=alice.tenant, url="http://127.0.0.1:9/h")


def test_the_headers_of_post_events_are_kept_with_the_event(alice, shop) -> None:
    answer = alice.client.post(
        "/api/v1/events",
        {"type": "order.paid", "data": {}},
        format="json",
        HTTP_TRACEPARENT=PARENT,
        HTTP_TRACESTATE="shop=1",
    )
    assert answer.status_code == 202
    assert Event.objects.get(pk=answer.json()["id"]).trace_context == f"{PARENT}\nshop=1"


def test_an_invalid_traceparent_header_is_ignored(alice, shop) -> None:
    answer = alice.client.post(
        "/api/v1/events", {"type": "order.paid", "data": {}}, format="json", HTTP_TRACEPARENT="x"
    )
    assert answer.status_code == 202
    assert Event.objects.get(pk=answer.json()["id"]).trace_context is None


def test_a_batch_item_keeps_its_own_traceparent_the_others_the_requests(alice, shop) -> None:
    answer = alice.client.post(
        "/api/v1/events/batch",
        {"events": [{"type": "a.b", "data": {}, "traceparent": ITEM}, {"type": "a.b", "data": {}}]},
        format="json",
        HTTP_TRACEPARENT=PARENT,
    )
    assert answer.status_code == 202
    ids = [e["id"] for e in answer.json()["events"]]
    assert [Event.objects.get(pk=i).trace_context for i in ids] == [ITEM, PARENT]


def test_a_malformed_item_traceparent_is_refused_naming_it(alice, shop) -> None:
    answer = alice.client.post(
        "/api/v1/events/batch",
        {"events": [{"type": "a.b", "data": {}}, {"type": "a.b", "data": {}, "traceparent": 5}]},
        format="json",
    )
    assert answer.status_code == 400
    assert "events[1].traceparent" in answer.content.decode()
    assert not Event.objects.exists()


def test_without_a_trace_context_nothing_is_kept(alice, shop) -> None:
    answer = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    assert Event.objects.get(pk=answer.json()["id"]).trace_context is None
