"""A dead letter whose event and delivery rows retention dropped replays, through a real
worker to a real receiver, with the same webhook-id, homing-sequence and body bytes."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from tests.factories import delivery_of, endpoint_via_api, event_via_api, history_dropped
from tests.processes import wait_until
from tests.receivers import Answer
from webhooks.models import Event

pytestmark = pytest.mark.e2e


def test_a_replay_after_the_drop_sends_what_the_first_attempt_sent(alice, homing, receiver_factory):
    refused: set[str] = set()

    def refuse_the_first_refund(request, n):
        """The first refund webhook is refused for good (404): its delivery dies."""
        if b'"order.refunded"' in request.body and not refused:
            refused.add(request.headers["webhook-id"])
            return Answer(404)
        return Answer(200)

    receiver = receiver_factory(refuse_the_first_refund)
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event_via_api(alice, data={"n": 1})
    event = event_via_api(alice, "order.refunded", data={"amount": 12.5, "note": "ünïcode"})
    wait_until(lambda: delivery_of(event).status == "dead")
    first = [r for r in receiver.requests if r.headers["webhook-id"] == event["id"]]
    assert len(first) == 1 and first[0].headers["homing-sequence"] == "2"
    letter = alice.client.get("/api/v1/dead-letters").json()["results"][0]
    history_dropped(delivery_ids=[letter["delivery_id"]], event_ids=[letter["event_id"]])
    assert not Event.objects.filter(pk=event["id"]).exists()

    response = alice.client.post(f"/api/v1/dead-letters/{letter['id']}/replay")

    assert response.status_code == 202, response.content
    wait_until(lambda: delivery_of(event).status == "succeeded")
    again = [r for r in receiver.requests if r.headers["webhook-id"] == event["id"]]
    assert len(again) == 2
    assert again[1].headers["homing-sequence"] == "2"
    assert again[1].body == first[0].body  # byte for byte, the event's timestamp included
    assert Delivery.objects.get(pk=letter["delivery_id"]).attempt_count == 2
