"""Feed against a real local HTTP server that answers as Homing's catch-up feed."""

from __future__ import annotations

import time

import pytest
from homing_receiver import Feed, FeedError, FeedExpired

from tests.receiver.feed_server import API_KEY, ENDPOINT_ID, FeedServer, Trouble

pytestmark = pytest.mark.e2e


def sequences(feed: Feed, after: int = 0) -> list[int]:
    return [message["sequence"] for message in feed.since(after)]


def test_it_yields_every_message_after_n_in_order_page_by_page(
    feed: Feed, feed_server: FeedServer
) -> None:
    messages = list(feed.since(0))

    assert [m["sequence"] for m in messages] == list(range(1, 251))
    assert messages[6] == feed_server.messages[6]  # the feed's dict, untouched
    assert [r["query"] for r in feed_server.requests] == [
        {"after": "0", "limit": "100"},
        {"after": "100", "limit": "100"},
        {"after": "200", "limit": "100"},
    ]
    assert {r["path"] for r in feed_server.requests} == {
        f"/api/v1/endpoints/{ENDPOINT_ID}/messages"
    }
    assert {r["authorization"] for r in feed_server.requests} == {f"Bearer {API_KEY}"}


def test_it_starts_after_the_sequence_asked_for(feed: Feed) -> None:
    assert sequences(feed, after=245) == [246, 247, 248, 249, 250]
    assert sequences(feed, after=250) == []


@pytest.mark.parametrize("suffix", ["", "/", "/api/v1", "/api/v1/"])
def test_base_url_is_the_servers_root_or_its_api_root(feed_server: FeedServer, suffix: str) -> None:
    # The root is what homing_client.Client takes: the same setting serves both (it was
    # a FeedError: HTTP 404 before).
    feed = Feed(feed_server.root_url + suffix, API_KEY, ENDPOINT_ID, page_size=500)

    assert len(sequences(feed)) == 250
    assert feed_server.requests[0]["path"] == f"/api/v1/endpoints/{ENDPOINT_ID}/messages"


def test_it_fetches_pages_only_as_you_iterate(feed: Feed, feed_server: FeedServer) -> None:
    messages = feed.since(0)
    assert feed_server.requests == []

    next(messages)

    assert len(feed_server.requests) == 1


def test_it_retries_5xx_until_the_feed_answers(feed: Feed, feed_server: FeedServer) -> None:
    feed_server.trouble = [
        Trouble(503, {"message": "maintenance"}),
        Trouble(500, b"<html>oops</html>"),
        Trouble(502, b""),
    ]

    assert sequences(feed) == list(range(1, 251))
    assert len(feed_server.requests) == 3 + 3


def test_it_retries_a_dropped_connection(feed: Feed, feed_server: FeedServer) -> None:
    feed_server.trouble = [Trouble(drop=True), Trouble(drop=True)]

    assert sequences(feed, after=240) == list(range(241, 251))
    assert len(feed_server.requests) == 3


def test_it_retries_an_answer_that_does_not_come_in_time(feed_server: FeedServer) -> None:
    feed = Feed(feed_server.base_url, API_KEY, ENDPOINT_ID, timeout=0.3, backoff=0.05)
    feed_server.trouble = [Trouble(stall=1.0)]

    assert sequences(feed, after=240) == list(range(241, 251))


def test_it_retries_a_page_that_is_not_json(feed: Feed, feed_server: FeedServer) -> None:
    feed_server.trouble = [Trouble(200, b'{"results": [')]

    assert sequences(feed, after=248) == [249, 250]


def test_it_gives_up_after_retry_for_with_a_clear_error(feed_server: FeedServer) -> None:
    feed = Feed(feed_server.base_url, API_KEY, ENDPOINT_ID, retry_for=0.5, backoff=0.05)
    feed_server.trouble = [Trouble(503, {"message": "maintenance"})] * 1000
    started = time.monotonic()

    with pytest.raises(FeedError, match="HTTP 503: maintenance") as caught:
        sequences(feed)

    assert 0.5 <= time.monotonic() - started < 10  # 1,000 503s would take far longer
    assert caught.value.status is None
    assert "unavailable after" in caught.value.message
    assert 2 < len(feed_server.requests) < 1000


def test_410_raises_feed_expired_with_the_oldest_sequence(
    feed: Feed, feed_server: FeedServer
) -> None:
    feed_server.oldest_sequence = 120

    with pytest.raises(FeedExpired) as caught:
        sequences(feed, after=100)

    assert caught.value.oldest_sequence == 120
    assert caught.value.status == 410
    assert "Messages before 120 are gone" in str(caught.value)
    assert isinstance(caught.value, FeedError)
    assert len(feed_server.requests) == 1  # not retried
    assert sequences(feed, after=119)[:2] == [120, 121]


def test_a_wrong_key_raises_at_once_with_the_status_and_message(
    feed_server: FeedServer,
) -> None:
    feed = Feed(feed_server.base_url, "hom_mallory_guess", ENDPOINT_ID)

    with pytest.raises(FeedError) as caught:
        sequences(feed)

    assert caught.value.status == 401
    assert caught.value.message == "Invalid API key"
    assert str(caught.value) == "HTTP 401: Invalid API key"
    assert len(feed_server.requests) == 1


def test_an_unknown_endpoint_raises_404(feed_server: FeedServer) -> None:
    feed = Feed(feed_server.base_url, API_KEY, "ep_bob")

    with pytest.raises(FeedError, match="HTTP 404: Not found"):
        sequences(feed)


def test_a_redirect_is_not_followed_with_the_key(feed: Feed, feed_server: FeedServer) -> None:
    feed_server.trouble = [Trouble(302, b"", headers={"Location": "http://evil.example/steal"})]

    with pytest.raises(FeedError) as caught:
        sequences(feed)

    assert caught.value.status == 302
    assert "redirect to 'http://evil.example/steal' not followed" in caught.value.message

    assert len(feed_server.requests) == 1


@pytest.mark.parametrize(
    "page",
    [
        {"results": [{"sequence": 3, "event_id": "e3"}, {"sequence": 2, "event_id": "e2"}]},
        {"results": [{"sequence": 0, "event_id": "e0"}]},
        {"results": [{"sequence": "1", "event_id": "e1"}]},
        {"results": [{"sequence": 1}]},
        {"results": [{"sequence": 1, "event_id": "e1"}], "next_after": 0},
        {"results": []},
        {"message": "not a page"},
    ],
)
def test_a_page_that_breaks_the_format_raises_instead_of_looping(
    feed: Feed, feed_server: FeedServer, page: dict[str, object]
) -> None:
    feed_server.trouble = [Trouble(200, {"done": False, "next_after": None} | page)]

    with pytest.raises(FeedError):
        sequences(feed)
