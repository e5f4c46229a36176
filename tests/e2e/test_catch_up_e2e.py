"""A receiver that loses webhooks finds its gaps and fills them from the catch-up feed.

Real parts end to end: a gunicorn web process serving the feed, a Celery worker, and a
receiver that verifies each webhook with homing_receiver, de-duplicates it and records
its `homing-sequence` — except every 7th, which it answers 200 and throws away (a crash
after the answer, a bad deploy)."""

from __future__ import annotations

import threading

import pytest
from homing_receiver import (
    Deduplicator,
    Feed,
    MemoryStore,
    SequenceTracker,
    Webhook,
    catch_up,
    sequence_from_headers,
)

from tests.factories import endpoint_via_api
from tests.processes import Web, wait_until
from tests.receivers import Answer

pytestmark = pytest.mark.e2e

EVENTS = 50


@pytest.fixture
def web(homing, tmp_path):
    started = Web(tmp_path, "web")
    yield started
    started.process.stop()


def test_a_receiver_that_dropped_every_seventh_webhook_catches_up_exactly_once(
    alice, homing, receiver_factory, web
):
    store = MemoryStore()
    dedup = Deduplicator(store)
    handled: list[str] = []  # event ids, in the order the receiver's handler ran
    lock = threading.Lock()
    checker: list[Webhook] = []
    dropped: list[int | None] = []  # the homing-sequence of each webhook thrown away
    tracker_seen: list[int] = []

    def handle(event_id: str) -> None:
        with lock:
            handled.append(event_id)

    def behave(request, n):
        if n % 7 == 6:
            dropped.append(sequence_from_headers(request.headers))
            return Answer(200)  # answered, then lost
        event = checker[0].verify(request.body, request.headers)
        dedup.process(event["id"], lambda: handle(event["id"]))
        sequence = sequence_from_headers(request.headers)
        assert sequence is not None, "every delivery carries its homing-sequence"
        tracker.see(sequence)
        tracker_seen.append(sequence)
        return Answer(200)

    receiver = receiver_factory(behave)
    endpoint = endpoint_via_api(alice, receiver.url)
    checker.append(Webhook(endpoint["secret"]))
    tracker = SequenceTracker(store, endpoint["id"])
    homing("worker")

    posted = [
        alice.client.post(
            "/api/v1/events", {"type": "order.paid", "data": {"n": n}}, format="json"
        ).json()
        for n in range(EVENTS)
    ]
    receiver.wait_for(EVENTS)
    lost = EVENTS // 7
    # A request is recorded as it arrives, before its handler runs: wait for the last one.
    wait_until(lambda: len(handled) >= EVENTS - lost, timeout=10)
    assert len(handled) == EVENTS - lost
    # The tracker sees a loss as a gap once a later sequence arrived: requests run
    # concurrently, so the last ones to arrive (lost or not) may be any of the highest.
    seen_up_to = max(tracker_seen)
    in_gaps = [n for first, last in tracker.gaps() for n in range(first, last + 1)]
    assert in_gaps == sorted(s for s in dropped if s is not None and s < seen_up_to)
    assert len(dropped) == lost

    caught: list[int] = []

    def handle_message(message: dict) -> None:
        caught.append(message["sequence"])
        handle(message["event_id"])

    feed = Feed(f"http://127.0.0.1:{web.port}/api/v1", alice.key, endpoint["id"])
    assert catch_up(tracker, feed, handle_message, deduplicator=dedup) == lost

    assert caught == sorted(caught)  # in sequence order
    assert sorted(handled) == sorted(event["id"] for event in posted)  # each exactly once
    assert len(set(handled)) == EVENTS
    assert (tracker.last_contiguous(), tracker.gaps()) == (EVENTS, [])
    # Nothing left to do: a second run handles nothing.
    assert catch_up(tracker, feed, handle_message, deduplicator=dedup) == 0
