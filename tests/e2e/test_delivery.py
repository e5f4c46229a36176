"""Real worker, real scheduler, real receiver: what a customer's endpoint sees."""

from __future__ import annotations

import itertools
import json

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook

from dlq.models import DeadLetter
from tests.factories import delivery_of, endpoint_via_api, event_via_api
from tests.processes import wait_until
from tests.receivers import Answer
from webhooks.models import Endpoint

pytestmark = pytest.mark.e2e


def test_a_delivery_is_signed_and_verifies_with_standardwebhooks(alice, homing, receiver_factory):
    receiver = receiver_factory()
    endpoint = endpoint_via_api(alice, receiver.url, headers={"X-Api-Token": "t0k"})
    homing("worker")
    event = event_via_api(alice, data={"amount": 4200, "note": "café"})

    [request] = receiver.wait_for(1)
    payload = StandardWebhook(endpoint["secret"]).verify(request.body, request.headers)
    assert payload == {
        "id": event["id"],
        "type": "payment.succeeded",
        "timestamp": event["created_at"],
        "data": {"amount": 4200, "note": "café"},
    }
    assert request.headers["webhook-id"] == event["id"]
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("Homing/")
    assert request.headers["x-api-token"] == "t0k"
    wait_until(lambda: delivery_of(event).status == "succeeded")
    detail = alice.client.get(f"/api/v1/deliveries/{event['deliveries'][0]['id']}").json()
    assert detail["attempt_count"] == 1 and detail["attempts"][0]["status_code"] == 200
    assert detail["attempts"][0]["response_body"] == "ok"
    assert detail["attempts"][0]["error"] is None and detail["last_error"] is None


def test_after_rotation_both_secrets_verify(alice, homing, receiver_factory):
    receiver = receiver_factory()
    endpoint = endpoint_via_api(alice, receiver.url)
    new_secret = alice.client.post(f"/api/v1/endpoints/{endpoint['id']}/rotate-secret").json()[
        "secret"
    ]
    homing("worker")
    event_via_api(alice)
    [request] = receiver.wait_for(1)
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (endpoint["secret"], new_secret):
        StandardWebhook(secret).verify(request.body, request.headers)


def test_a_failing_endpoint_gets_every_attempt_then_a_dead_letter(
    alice, homing, receiver_factory, settings
):
    settings.HOMING_RETRY_SCHEDULE = "1s,2s,4s"
    receiver = receiver_factory(lambda request, n: Answer(503, b"down"))
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event = event_via_api(alice)

    requests = receiver.wait_for(4, timeout=30)
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(requests)]
    for gap, step in zip(gaps, [1, 2, 4]):
        assert step * 0.8 <= gap <= step * 1.2 + 2, gaps
    wait_until(lambda: delivery_of(event).status == "dead")
    letter = DeadLetter.objects.get(delivery_id=event["deliveries"][0]["id"])
    assert letter.reason == "HTTP 503 after 4 attempts"
    detail = alice.client.get(f"/api/v1/deliveries/{letter.delivery_id}").json()
    assert detail["status"] == "dead" and detail["last_error"] == "HTTP 503 after 4 attempts"
    assert [a["status_code"] for a in detail["attempts"]] == [503] * 4
    assert [a["response_body"] for a in detail["attempts"]] == ["down"] * 4
    assert {r.headers["webhook-id"] for r in requests} == {event["id"]}
    import time

    time.sleep(2)
    assert len(receiver.requests) == 4


def test_failing_twice_then_succeeding_ends_succeeded(alice, homing, receiver_factory, settings):
    settings.HOMING_RETRY_SCHEDULE = "1s,2s,4s"
    receiver = receiver_factory(lambda request, n: Answer(500) if n < 2 else Answer(200))
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event = event_via_api(alice)
    wait_until(lambda: delivery_of(event).status == "succeeded", timeout=20)
    assert len(receiver.requests) == 3
    assert [a.status_code for a in delivery_of(event).attempts.all()] == [500, 500, 200]


def test_a_404_is_dead_after_one_attempt(alice, homing, receiver_factory):
    receiver = receiver_factory(lambda request, n: Answer(404))
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event = event_via_api(alice)
    wait_until(lambda: delivery_of(event).status == "dead")
    assert DeadLetter.objects.get().reason == "HTTP 404 (not retryable)"
    assert len(receiver.requests) == 1


def test_a_410_deactivates_the_endpoint(alice, homing, receiver_factory):
    receiver = receiver_factory(lambda request, n: Answer(410))
    endpoint = endpoint_via_api(alice, receiver.url)
    homing("worker")
    event = event_via_api(alice)
    wait_until(lambda: not Endpoint.objects.get(pk=endpoint["id"]).is_active)
    assert delivery_of(event).status == "dead"
    later = event_via_api(alice)
    assert later["deliveries"] == []


@pytest.mark.parametrize(("retry_after", "low", "high"), [("3", 3.0, 5.5), ("60", 3.2, 6.5)])
def test_retry_after_lengthens_the_wait_up_to_the_largest_step(
    alice, homing, receiver_factory, settings, retry_after, low, high
):
    settings.HOMING_RETRY_SCHEDULE = "1s,2s,4s"
    receiver = receiver_factory(
        lambda request, n: (
            Answer(429, headers={"Retry-After": retry_after}) if n == 0 else Answer(200)
        )
    )
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event_via_api(alice)
    first, second = receiver.wait_for(2, timeout=20)
    assert low <= second.at - first.at <= high


def test_retry_and_replay_keep_the_webhook_id_and_sequence(alice, homing, receiver_factory):
    receiver = receiver_factory(lambda request, n: Answer(404) if n == 0 else Answer(200))
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event = event_via_api(alice)
    wait_until(lambda: delivery_of(event).status == "dead")
    letters = alice.client.get("/api/v1/dead-letters").json()["results"]
    assert [letter["reason"] for letter in letters] == ["HTTP 404 (not retryable)"]
    response = alice.client.post(f"/api/v1/dead-letters/{letters[0]['id']}/replay")
    assert response.status_code == 202 and response.json()["replayed_at"]
    wait_until(lambda: delivery_of(event).status == "succeeded")
    assert [r.headers["webhook-id"] for r in receiver.requests] == [event["id"]] * 2
    assert json.loads(receiver.requests[1].body)["id"] == event["id"]
    assert (
        alice.client.get("/api/v1/dead-letters?replayed=true").json()["results"][0]["id"]
        == letters[0]["id"]
    )
    assert alice.client.post(f"/api/v1/dead-letters/{letters[0]['id']}/replay").status_code == 409
    retried = alice.client.post(f"/api/v1/deliveries/{event['deliveries'][0]['id']}/retry")
    assert retried.status_code == 202
    receiver.wait_for(3)
    assert receiver.requests[2].headers["webhook-id"] == event["id"]
    # The attempt, the replay and the retry all carry the delivery's sequence.
    assert [r.headers["homing-sequence"] for r in receiver.requests] == ["1"] * 3


def test_retry_while_an_attempt_is_in_flight_adds_one_after_it(alice, homing, receiver_factory):
    receiver = receiver_factory(lambda request, n: Answer(delay=2.0) if n == 0 else Answer())
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event = event_via_api(alice)
    receiver.wait_for(1)  # the first attempt is now in flight, held by the receiver
    assert delivery_of(event).status == "delivering"

    response = alice.client.post(f"/api/v1/deliveries/{event['deliveries'][0]['id']}/retry")

    assert response.status_code == 202
    first, second = receiver.wait_for(2, timeout=20)
    assert second.at - first.at >= 2.0  # never two attempts of one delivery at once
    assert second.headers["webhook-id"] == event["id"]
    wait_until(lambda: delivery_of(event).attempts.count() == 2)
    assert delivery_of(event).status == "succeeded"
