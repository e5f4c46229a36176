"""homing_client.Client against real local HTTP servers (tests/receivers.py)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from homing_client import Client, HomingError, HomingThrottled, HomingUnavailable

from tests.receivers import Answer, Receiver

EVENT = {"id": "evt_1", "type": "order.created", "data": {"n": 1}, "deliveries": []}


def accepted(body: dict | None = None) -> Answer:
    return Answer(
        status=202,
        body=json.dumps(body or EVENT).encode(),
        headers={"Content-Type": "application/json"},
    )


def refused(status: int, message: str) -> Answer:
    return Answer(status=status, body=json.dumps({"message": message}).encode())


@pytest.fixture
def server() -> Iterator[Receiver]:
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


def base_url(receiver: Receiver) -> str:
    return receiver.url.removesuffix("/hook")


@pytest.mark.parametrize("suffix", ["", "/", "/api/v1", "/api/v1/"])
def test_base_url_is_the_servers_root_or_its_api_root(server: Receiver, suffix: str) -> None:
    # The same URL as homing_receiver.Feed takes, whichever of the two is given.
    server.behaviour = lambda request, n: accepted(
        {"events": [EVENT]} if request.path.endswith("/batch") else EVENT
    )
    Client(base_url(server) + suffix, "k").publish("order.created", {})
    Client(base_url(server) + suffix, "k").publish_batch([{"type": "a.b", "data": {}}])
    assert [request.path for request in server.requests] == [
        "/api/v1/events",
        "/api/v1/events/batch",
    ]


def keys(receiver: Receiver) -> list[str]:
    return [request.headers["idempotency-key"] for request in receiver.requests]


def test_it_publishes_an_event_and_returns_the_202_body(server: Receiver) -> None:
    server.behaviour = lambda request, n: accepted()

    event = Client(base_url(server) + "/", "hk_secret").publish("order.created", {"n": 1})

    assert event == EVENT
    (request,) = server.requests
    assert request.path == "/api/v1/events"
    assert json.loads(request.body) == {"type": "order.created", "data": {"n": 1}}
    assert request.headers["authorization"] == "Bearer hk_secret"
    assert request.headers["content-type"] == "application/json"
    # A key is generated when none is given, so that a retry cannot create a second event.
    assert 1 <= len(request.headers["idempotency-key"]) <= 255


def test_it_sends_the_idempotency_key_it_is_given(server: Receiver) -> None:
    server.behaviour = lambda request, n: accepted()
    Client(base_url(server), "k").publish("order.created", {}, idempotency_key="order-42")
    assert keys(server) == ["order-42"]


def test_it_retries_5xx_and_409_with_the_same_key_and_growing_jittered_waits(
    server: Receiver,
) -> None:
    answers = [refused(503, "down"), refused(409, "in progress"), refused(500, "oops")]
    server.behaviour = lambda request, n: answers[n] if n < len(answers) else accepted()
    waits: list[float] = []
    client = Client(base_url(server), "k", backoff=0.1, max_backoff=0.3, sleep=waits.append)

    assert client.publish("order.created", {"n": 1}) == EVENT

    assert len(server.requests) == 4
    assert len(set(keys(server))) == 1
    # Full jitter: each wait is somewhere below its exponential cap (0.1, 0.2, then 0.3).
    assert len(waits) == 3
    for wait, cap in zip(waits, [0.1, 0.2, 0.3], strict=True):
        assert 0 <= wait <= cap


def test_it_waits_for_real_between_retries(server: Receiver) -> None:
    server.behaviour = lambda request, n: refused(502, "bad gateway") if n < 3 else accepted()
    started = time.monotonic()
    Client(base_url(server), "k", backoff=0.2).publish("order.created", {})
    # Three jittered waits under caps of 0.2 + 0.4 + 0.8 s (the caps themselves are pinned
    # with an injected sleep above); ten times that only catches waits without a cap.
    assert time.monotonic() - started < 14
    assert len(server.requests) == 4 and len(set(keys(server))) == 1


def test_it_retries_a_timeout_with_the_same_key(server: Receiver) -> None:
    server.behaviour = lambda request, n: Answer(delay=1.0) if n == 0 else accepted()

    event = Client(base_url(server), "k", timeout=0.3, backoff=0.01).publish("a.b", {})

    assert event == EVENT
    server.wait_for(2)
    assert len(set(keys(server))) == 1


def test_it_retries_a_connection_dropped_before_the_answer() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    requests: list[bytes] = []

    def serve() -> None:
        for n in range(2):
            conn, _ = listener.accept()
            with conn:
                requests.append(conn.recv(65536))
                if n == 1:
                    body = json.dumps(EVENT).encode()
                    conn.sendall(
                        b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
                    )
                # n == 0: close without a word, as a crashed proxy would.

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    assert Client(url, "k", backoff=0.01).publish("a.b", {}, idempotency_key="same") == EVENT
    thread.join(5)
    listener.close()
    assert [b"Idempotency-Key: same" in request for request in requests] == [True, True]


def throttled(retry_after: str | None, code: str = "rate_limited") -> Answer:
    headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    body = json.dumps({"message": "This tenant is over its event rate", "code": code})
    return Answer(status=429, body=body.encode(), headers=headers)


def test_it_waits_a_429_out_as_retry_after_says_then_sends_again(server: Receiver) -> None:
    server.behaviour = lambda request, n: throttled("1") if n == 0 else accepted()
    started = time.monotonic()

    assert Client(base_url(server), "k", backoff=0.01).publish("a.b", {}) == EVENT

    # Retry-After: 1 and up to a tenth more: at least the second it says (a lower bound a
    # slow machine only lengthens); under ten times that, far from what it needs.
    assert 1.0 <= time.monotonic() - started < 11
    assert len(server.requests) == 2 and len(set(keys(server))) == 1


def test_a_429_without_retry_after_is_retried_with_backoff(server: Receiver) -> None:
    server.behaviour = lambda request, n: throttled(None) if n < 2 else accepted()
    waits: list[float] = []
    client = Client(base_url(server), "k", backoff=0.1, max_backoff=0.3, sleep=waits.append)

    assert client.publish("a.b", {}) == EVENT
    assert len(waits) == 2 and all(0 <= wait <= 0.33 for wait in waits)
    assert len(set(keys(server))) == 1


def test_a_429_that_lasts_past_retry_for_raises_throttled(server: Receiver) -> None:
    server.behaviour = lambda request, n: throttled("1", code="backlog_full")
    started = time.monotonic()

    with pytest.raises(HomingThrottled) as raised:
        Client(base_url(server), "k", retry_for=2.5).publish("a.b", {}, idempotency_key="k-1")

    assert time.monotonic() - started < 25  # retry_for=2.5, not on and on
    assert isinstance(raised.value, HomingError)
    assert not isinstance(raised.value, HomingUnavailable)  # nothing was written
    assert raised.value.status == 429 and raised.value.code == "backlog_full"
    assert raised.value.retry_after == 1.0
    assert 2 <= len(server.requests) <= 3 and set(keys(server)) == {"k-1"}


def test_a_retry_after_longer_than_retry_for_raises_at_once(server: Receiver) -> None:
    server.behaviour = lambda request, n: throttled("30")
    waits: list[float] = []

    with pytest.raises(HomingThrottled) as raised:
        Client(base_url(server), "k", retry_for=5, sleep=waits.append).publish("a.b", {})

    assert raised.value.retry_after == 30.0
    assert waits == [] and len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
def test_it_raises_at_once_on_any_other_4xx(server: Receiver, status: int) -> None:
    server.behaviour = lambda request, n: refused(status, "Invalid input: type: required")

    with pytest.raises(HomingError) as raised:
        Client(base_url(server), "k", backoff=0.01).publish("a.b", {})

    assert raised.value.status == status
    assert raised.value.message == "Invalid input: type: required"
    assert not isinstance(raised.value, HomingUnavailable)
    assert len(server.requests) == 1


def test_it_gives_up_after_retry_for(server: Receiver) -> None:
    server.behaviour = lambda request, n: refused(503, "maintenance")
    started = time.monotonic()

    with pytest.raises(HomingUnavailable) as raised:
        Client(base_url(server), "k", retry_for=3, backoff=0.05).publish("a.b", {})

    # retry_for=3, not on and on; 3 s leave room for the 3 tries below however slow the
    # machine answers (waits of 0.05 and 0.1 s at most before the third).
    assert 3 <= time.monotonic() - started < 30
    assert raised.value.status == 503 and raised.value.message == "maintenance"
    assert len(server.requests) >= 3 and len(set(keys(server))) == 1


def test_an_unreachable_homing_raises_unavailable_without_a_status() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    with pytest.raises(HomingUnavailable) as raised:
        Client(f"http://127.0.0.1:{port}", "k", retry_for=0.3, backoff=0.05).publish("a.b", {})

    assert raised.value.status is None
    assert "unreachable" in raised.value.message


def test_unserializable_data_raises_type_error_and_sends_nothing(server: Receiver) -> None:
    with pytest.raises(TypeError):
        Client(base_url(server), "k").publish("a.b", {"when": {1, 2}})
    assert server.requests == []


def test_publish_batch_posts_the_events_and_returns_them_in_order(server: Receiver) -> None:
    answer = {"events": [{"id": "evt_1", "type": "a.b"}, {"id": "evt_2", "type": "c.d"}]}
    server.behaviour = lambda request, n: refused(503, "busy") if n == 0 else accepted(answer)

    events = Client(base_url(server), "k", backoff=0.01).publish_batch(
        [{"type": "a.b", "data": {"n": 1}}, {"type": "c.d", "data": {"n": 2}}]
    )

    assert events == answer["events"]
    assert [request.path for request in server.requests] == ["/api/v1/events/batch"] * 2
    assert json.loads(server.requests[0].body) == {
        "events": [{"type": "a.b", "data": {"n": 1}}, {"type": "c.d", "data": {"n": 2}}]
    }
    assert len(set(keys(server))) == 1


def test_publish_batch_raises_on_a_refused_batch(server: Receiver) -> None:
    server.behaviour = lambda request, n: refused(400, "Invalid input: events[1].type: required")
    with pytest.raises(HomingError) as raised:
        Client(base_url(server), "k").publish_batch([{"type": "a.b", "data": {}}] * 2, "batch-1")
    assert raised.value.status == 400 and "events[1].type" in raised.value.message
    assert keys(server) == ["batch-1"]


def test_it_sends_the_current_spans_trace_context(server: Receiver) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    server.behaviour = lambda request, n: accepted()
    tracer = TracerProvider().get_tracer("producer")
    with tracer.start_as_current_span("checkout") as span:
        Client(base_url(server), "k").publish("order.created", {})
        context = span.get_span_context()
    Client(base_url(server), "k").publish("order.created", {})  # outside any span

    inside, outside = server.requests
    assert inside.headers["traceparent"] == (
        f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    )
    assert "traceparent" not in outside.headers
