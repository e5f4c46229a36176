"""A worker that cannot decrypt an endpoint's custom header values (the key changed
without a rotation) sends nothing to it and spends no attempt: the delivery waits, its
`last_error` naming `headers`, while the same claim's delivery to another endpoint goes
out. An attempt that meets an unreadable value anyway fails retryably, naming the key."""

from __future__ import annotations

import asyncio

import pytest

from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.retry import classify
from deliveries.models import Delivery
from deliveries.results import ErrorKind
from deliveries.worker.claims import deliveries_claim
from deliveries.worker.worker import Worker
from tests.factories import endpoint_via_api, endpoint_via_api_with_lost_key, event_via_api
from tests.processes import wait_until
from tests.receivers import Receiver

HEADERS = {"Authorization": "Bearer alice-token"}


@pytest.fixture
def receiver():
    started = Receiver().start()
    yield started
    started.stop()


@pytest.mark.django_db(transaction=True)
def test_a_delivery_whose_headers_cannot_be_read_waits_and_the_others_go(
    alice, settings, receiver
) -> None:
    lost = endpoint_via_api_with_lost_key(
        alice, settings, receiver.url, headers=HEADERS, event_types=["a.b"]
    )
    # A new secret under the current key: only the header values stay unreadable.
    assert alice.client.post(f"/api/v1/endpoints/{lost['id']}/rotate-secret").status_code == 200
    endpoint_via_api(alice, receiver.url, headers=HEADERS, event_types=["a.b"])
    event = event_via_api(alice, "a.b")
    waiting = next(d["id"] for d in event["deliveries"] if d["endpoint_id"] == lost["id"])
    worker = Worker(capacity=20).start()  # a claim reserves at least MIN_RESERVATION
    try:
        [request] = receiver.wait_for(1, timeout=30)
        wait_until(
            lambda: "headers" in Delivery.objects.get(pk=waiting).last_error,
            timeout=10,
            message="the delivery to the endpoint with unreadable headers was not given back",
        )
    finally:
        worker.stop()
        worker.drain(timeout=5)
        worker.close()
    assert request.headers["authorization"] == HEADERS["Authorization"]
    delivery = Delivery.objects.get(pk=waiting)
    assert (delivery.status, delivery.attempt_count) == ("pending", 0)
    assert delivery.last_error.startswith("cannot decrypt the endpoint's headers:")
    assert "HOMING_ENCRYPTION_KEY lacks the key" in delivery.last_error
    assert len(receiver.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_an_attempt_that_meets_an_unreadable_value_fails_retryably_naming_the_key(
    alice, settings, receiver
) -> None:
    endpoint_via_api_with_lost_key(alice, settings, receiver.url, headers=HEADERS)
    event_via_api(alice, "a.b")
    [claimed] = deliveries_claim(limit=1, policy=current_policy())
    worker = Worker(capacity=4)
    worker.sender.start()  # the event loop only
    try:
        sent = worker.attempts.send(claimed, current_policy())
        result = asyncio.run_coroutine_threadsafe(sent, worker.sender.loop).result(timeout=10)
    finally:
        worker.sender.close()
        worker.close()
    assert result is not None and result.error_kind is ErrorKind.KEY
    assert "HOMING_ENCRYPTION_KEY lacks the key" in (result.error or "")
    assert classify(status_code=None, error_kind=result.error_kind).outcome == "retryable"
    assert receiver.requests == []
