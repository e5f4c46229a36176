"""catch_up: a receiver fills its gaps from the feed (a real local HTTP server)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from homing_receiver import (
    Deduplicator,
    DuplicateInProgress,
    Feed,
    FeedExpired,
    MemoryStore,
    SequenceTracker,
    catch_up,
)

from tests.receiver.feed_server import ENDPOINT_ID, FeedServer

pytestmark = pytest.mark.e2e


class Handler:
    """The receiver's business logic: remembers what it handled, can be told to fail."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.handled: list[int] = []
        self.fail_at = fail_at

    def __call__(self, message: dict[str, Any]) -> None:
        if message["sequence"] == self.fail_at:
            raise ConnectionError("warehouse API down")
        self.handled.append(message["sequence"])


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def tracker(store: MemoryStore) -> SequenceTracker:
    return SequenceTracker(store, ENDPOINT_ID)


def test_a_fresh_receiver_handles_everything_in_order(tracker: SequenceTracker, feed: Feed) -> None:
    handler = Handler()

    assert catch_up(tracker, feed, handler) == 250

    assert handler.handled == list(range(1, 251))
    assert tracker.last_contiguous() == 250
    assert catch_up(tracker, feed, handler) == 0  # nothing new: nothing handled twice


def test_it_starts_after_the_mark_and_skips_what_was_seen_live(
    tracker: SequenceTracker, feed: Feed, feed_server: FeedServer
) -> None:
    # Live webhooks 1..200 arrived except every 7th: those were lost after a 200.
    for sequence in range(1, 201):
        if sequence % 7:
            tracker.see(sequence)
    handler = Handler()

    handled = catch_up(tracker, feed, handler)

    lost = [n for n in range(1, 201) if n % 7 == 0]
    assert handler.handled == lost + list(range(201, 251))
    assert handled == len(lost) + 50
    assert (tracker.last_contiguous(), tracker.gaps()) == (250, [])
    assert feed_server.requests[0]["query"]["after"] == "6"


def test_a_deduplicator_skips_a_message_already_handled_live(
    store: MemoryStore, tracker: SequenceTracker, feed: Feed, feed_server: FeedServer
) -> None:
    dedup = Deduplicator(store)
    live = Handler()
    # Webhook 3 was handled live (webhook-id is the event id), but the process died
    # before it recorded the sequence.
    third = feed_server.messages[2]
    assert dedup.process(third["event_id"], lambda: live(third)) is True
    handler = Handler()

    handled = catch_up(tracker, feed, handler, deduplicator=dedup)

    assert 3 not in handler.handled
    assert handler.handled == [n for n in range(1, 251) if n != 3]
    assert handled == 249
    assert tracker.last_contiguous() == 250
    assert catch_up(tracker, feed, handler, deduplicator=dedup) == 0


def test_a_failing_handler_stops_the_run_and_keeps_what_was_done(
    tracker: SequenceTracker, feed: Feed
) -> None:
    handler = Handler(fail_at=5)

    with pytest.raises(ConnectionError, match="warehouse API down"):
        catch_up(tracker, feed, handler)

    assert handler.handled == [1, 2, 3, 4]
    assert tracker.last_contiguous() == 4

    handler.fail_at = None
    assert catch_up(tracker, feed, handler) == 246
    assert handler.handled == list(range(1, 251))


def test_with_a_deduplicator_a_failed_message_runs_again_next_time(
    store: MemoryStore, tracker: SequenceTracker, feed: Feed
) -> None:
    dedup = Deduplicator(store)
    handler = Handler(fail_at=100)

    with pytest.raises(ConnectionError):
        catch_up(tracker, feed, handler, deduplicator=dedup)
    handler.fail_at = None

    assert catch_up(tracker, feed, handler, deduplicator=dedup) == 151
    assert handler.handled == list(range(1, 251))


def test_a_message_being_handled_live_is_left_to_that_delivery(
    store: MemoryStore, tracker: SequenceTracker, feed: Feed, feed_server: FeedServer
) -> None:
    dedup = Deduplicator(store)
    # Another worker holds webhook 10's claim right now.
    store.claim(feed_server.messages[9]["event_id"], "live-worker", 60)
    handler = Handler()

    assert catch_up(tracker, feed, handler, deduplicator=dedup) == 249

    assert 10 not in handler.handled
    assert tracker.last_contiguous() == 9
    assert tracker.gaps() == [(10, 10)]
    with pytest.raises(DuplicateInProgress):
        dedup.process(feed_server.messages[9]["event_id"], lambda: None)


def test_feed_expired_propagates_and_reset_resumes_from_the_oldest_kept(
    tracker: SequenceTracker, feed: Feed, feed_server: FeedServer
) -> None:
    tracker.see(1)
    feed_server.oldest_sequence = 200  # 2..199 were purged after retention
    handler = Handler()

    with pytest.raises(FeedExpired) as caught:
        catch_up(tracker, feed, handler)
    assert handler.handled == []

    # The receiver reconciles 2..199 from its own data, then resumes.
    tracker.reset(to=caught.value.oldest_sequence - 1)
    assert catch_up(tracker, feed, handler) == 51
    assert handler.handled == list(range(200, 251))


def test_sequences_missing_from_the_feed_are_logged_and_stay_a_gap(
    tracker: SequenceTracker, feed: Feed, feed_server: FeedServer, caplog: pytest.LogCaptureFixture
) -> None:
    feed_server.messages = [m for m in feed_server.messages if m["sequence"] not in (4, 5)]
    handler = Handler()

    with caplog.at_level("WARNING", logger="homing_receiver"):
        assert catch_up(tracker, feed, handler) == 248

    assert "sequences 4-5 are missing from the catch-up feed" in caplog.text
    assert tracker.gaps() == [(4, 5)]


# Routes for the test below; it points ROOT_URLCONF at this module.
urlpatterns: list[Any] = []


@pytest.mark.django_db(transaction=True)
def test_live_webhooks_and_catch_up_handle_every_event_once_in_order(
    secret: str, sign_headers: Any, feed: Feed, feed_server: FeedServer, settings: Any
) -> None:
    """alice's receiver failed every 7th webhook until the sender gave up on them."""
    from django.http import HttpRequest, HttpResponse
    from django.test import Client
    from django.urls import path
    from homing_receiver.django import DjangoStore, webhook_view

    feed_server.messages = feed_server.messages[:70]
    store = DjangoStore()
    dedup = Deduplicator(store)
    tracker = SequenceTracker(store, ENDPOINT_ID)
    handled: list[str] = []

    def handle(event_type: str, data: dict[str, Any], event_id: str) -> None:
        handled.append(event_id)

    @webhook_view(secret=secret, deduplicator=dedup, tracker=tracker)
    def order_events(request: HttpRequest, event: dict[str, Any]) -> HttpResponse:
        if int(request.headers["homing-sequence"]) % 7 == 0 and broken:
            raise ConnectionError("warehouse API down")
        handle(event["type"], event["data"], event["id"])
        return HttpResponse(status=204)

    urlpatterns[:] = [path("hooks/orders/", order_events)]
    settings.ROOT_URLCONF = __name__

    def deliver(message: dict[str, Any]) -> int:
        body = json.dumps(
            {
                "id": message["event_id"],
                "type": message["type"],
                "timestamp": message["created_at"],
                "data": message["data"],
            }
        ).encode()
        headers = sign_headers(body, msg_id=message["event_id"]) | {
            "homing-sequence": str(message["sequence"])
        }
        return (
            Client()
            .post("/hooks/orders/", body, content_type="application/json", headers=headers)
            .status_code
        )

    broken = True
    statuses = [deliver(message) for message in feed_server.messages]
    assert statuses.count(500) == 10
    assert tracker.gaps() == [(n, n) for n in range(7, 64, 7)]
    assert tracker.last_contiguous() == 6

    broken = False
    assert (
        catch_up(tracker, feed, lambda m: handle(m["type"], m["data"], m["event_id"]), dedup) == 10
    )

    all_ids = [m["event_id"] for m in feed_server.messages]
    assert sorted(handled) == sorted(all_ids)  # each exactly once
    assert handled[-10:] == [all_ids[n - 1] for n in range(7, 71, 7)]  # in sequence order
    assert (tracker.last_contiguous(), tracker.gaps()) == (70, [])
    # The sender's late retry of a caught-up webhook is a duplicate now.
    assert deliver(feed_server.messages[6]) == 200
    assert len(handled) == 70
