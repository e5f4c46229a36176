"""The HTTP transport against real local servers: what goes on the wire, what comes back,
and that slow, huge or private receivers cannot hold a worker or be reached."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.network import is_public_address, resolve_blocked_reason
from deliveries.transport.sender import RESPONSE_BODY_LIMIT, Sender
from tests.scripted_receivers import Receiver, Request, answer, hang, response


def post(sender: Sender, url: str, timeout: float = 5.0, **headers: str):
    return sender.send(url=url, body=b'{"id":"evt_1"}', headers=headers, timeout=timeout)


# --- what goes on the wire ---------------------------------------------------------


def test_it_posts_the_exact_body_with_our_headers(serve, sender) -> None:
    receiver = serve()
    body = '{"id":"evt_1","data":{"name":"Zoë"}}'.encode()
    headers = {
        "webhook-id": "evt_1",
        "webhook-timestamp": "1714564800",
        "webhook-signature": "v1,abc= v1,def=",
        "Authorization": "Bearer alice",
        "content-type": "text/plain",
    }  # ours wins: sent once, as JSON
    result = sender.send(
        url=receiver.url("/hooks/alice?tenant=1"), body=body, headers=headers, timeout=5
    )

    assert result.status_code == 200 and result.error is None
    [request] = receiver.requests
    assert (request.method, request.path) == ("POST", "/hooks/alice?tenant=1")
    assert request.body == body
    assert request.header("Content-Type") == ["application/json"]
    assert request.header("User-Agent") == ["Homing/1.2.3"]
    assert request.header("Content-Length") == [str(len(body))]
    assert request.header("webhook-id") == ["evt_1"]
    assert request.header("webhook-timestamp") == ["1714564800"]
    assert request.header("webhook-signature") == ["v1,abc= v1,def="]
    assert request.header("Authorization") == ["Bearer alice"]


@pytest.mark.parametrize("status", [200, 201, 204, 404, 410, 500, 503])
def test_it_returns_the_receivers_status_and_body(serve, sender, status: int) -> None:
    body = b"" if status == 204 else b"nope" if status >= 400 else b"thanks"
    result = post(sender, serve(answer(status, body)).url())
    assert (result.status_code, result.error, result.response_body) == (status, None, body)
    assert result.duration_ms >= 0


def test_it_does_not_follow_redirects(serve, sender) -> None:
    target = serve()
    receiver = serve(answer(302, b"", Location=target.url()))
    result = post(sender, receiver.url())
    assert result.status_code == 302
    assert len(receiver.requests) == 1
    assert target.requests == []


def test_it_captures_retry_after(serve, sender) -> None:
    result = post(sender, serve(answer(429, b"slow down", Retry_After="120")).url())
    assert (result.status_code, result.retry_after) == (429, "120")
    assert post(sender, serve().url()).retry_after is None


def test_it_reuses_one_connection_for_consecutive_sends(serve, sender) -> None:
    receiver = serve()
    results = [post(sender, receiver.url()) for _ in range(5)]
    assert [r.status_code for r in results] == [200] * 5
    assert receiver.connections == 1
    assert {r.connection for r in receiver.requests} == {1}


def test_urls_on_one_host_share_its_connections_and_keep_their_own_paths(serve, sender) -> None:
    receiver = serve()
    urls = [receiver.url("/a"), receiver.url("/b?tenant=x&n=1"), receiver.url("/a")]
    assert [post(sender, url).status_code for url in urls] == [200] * 3
    assert [r.path for r in receiver.requests] == ["/a", "/b?tenant=x&n=1", "/a"]
    assert receiver.connections == 1


def test_many_threads_can_send_at_once(serve, sender) -> None:
    receiver = serve()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: post(sender, receiver.url()), range(320)))
    assert all(r.status_code == 200 for r in results)
    assert len(receiver.requests) == 320
    assert receiver.connections <= 32  # pooled, not one connection per request


# --- errors never raise ------------------------------------------------------------


def test_a_refused_connection_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    result = post(
        Sender(version="1", allow_private_networks=True).start(), f"http://127.0.0.1:{port}/"
    )
    assert result.status_code is None
    assert result.error is not None and result.error.startswith("connection error: ")
    assert "Connection refused" in result.error


def test_an_unknown_host_is_a_connection_error(sender) -> None:
    result = post(sender, "http://no-such-host.invalid/hook")
    assert result.error is not None and result.error.startswith("connection error: ")


def test_a_bad_url_is_reported_not_raised(sender) -> None:
    assert post(sender, "ftp://example.com/x").error.startswith("invalid URL: ")
    assert post(sender, "http://exa mple.com/x").error.startswith("invalid URL: ")


def test_a_plain_http_server_behind_an_https_url_is_a_tls_error(serve, sender) -> None:
    receiver = serve(on_connect=lambda sock: sock.sendall(response(400, b"plain http")))
    result = post(sender, receiver.url().replace("http://", "https://"))
    assert result.status_code is None
    assert result.error is not None and result.error.startswith("TLS error: ")


def test_a_server_closing_without_answer_is_a_connection_error(serve, sender) -> None:
    receiver = serve(lambda sock, request, receiver: False)
    result = post(sender, receiver.url())
    assert result.error is not None and result.error.startswith("connection error: ")
    assert len(receiver.requests) == 1


# --- time and memory bounds --------------------------------------------------------


def test_a_hanging_server_times_out(serve, sender) -> None:
    receiver = serve(hang)
    started = time.monotonic()
    result = post(sender, receiver.url(), timeout=1.0)
    elapsed = time.monotonic() - started
    assert (result.status_code, result.error) == (None, "timeout")
    assert 0.9 <= elapsed < 10  # a hang would last the test; wide: the machine is shared
    assert len(receiver.requests) == 1  # it did get the request


def test_a_body_trickling_one_byte_per_200ms_is_cut_at_the_timeout(serve, sender) -> None:
    def trickle(sock: socket.socket, request: Request, receiver: Receiver) -> bool:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):
            if receiver.stop.wait(0.2):
                break
            sock.sendall(b"x")
        return False

    receiver = serve(trickle)
    started = time.monotonic()
    result = post(sender, receiver.url(), timeout=1.0)
    elapsed = time.monotonic() - started
    assert elapsed < 10  # 100 bytes would take 20 s
    assert result.status_code == 200  # the receiver did answer 200
    assert result.error is None
    assert 1 <= len(result.response_body) <= 6
    # The connection is not reused with half a body in it: the next send opens another.
    receiver.behaviour = answer(200)
    assert post(sender, receiver.url()).status_code == 200
    assert receiver.connections == 2


def test_headers_trickling_one_byte_per_200ms_time_out(serve, sender) -> None:
    def trickle_headers(sock: socket.socket, request: Request, receiver: Receiver) -> bool:
        sock.sendall(b"HTTP/1.1 200 OK\r\n")
        for byte in b"X-Slow: " + b"a" * 100:
            if receiver.stop.wait(0.2):
                break
            sock.sendall(bytes([byte]))
        return False

    started = time.monotonic()
    result = post(sender, serve(trickle_headers).url(), timeout=1.0)
    assert time.monotonic() - started < 10  # 100 header bytes would take 20 s
    assert (result.status_code, result.error) == (None, "timeout")


def test_a_20mb_response_is_not_read_whole(serve, sender) -> None:
    size = 20 * 1024 * 1024

    def flood(sock: socket.socket, request: Request, receiver: Receiver) -> bool:
        sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
        chunk = b"y" * 65536
        for _ in range(size // len(chunk)):
            sock.sendall(chunk)  # raises once the client has closed the connection
            receiver.bytes_written += len(chunk)
        return True

    receiver = serve(flood)
    started = time.monotonic()
    result = post(sender, receiver.url(), timeout=10)
    assert time.monotonic() - started < 8  # inside its 10 s timeout; the body bound is the proof
    assert result.status_code == 200
    assert result.response_body == b"y" * RESPONSE_BODY_LIMIT
    assert receiver.handlers_done.wait(5), "the server is still writing: the body was drained"
    assert receiver.bytes_written < size


def test_a_complete_body_longer_than_the_limit_is_truncated(serve, sender) -> None:
    body = bytes(range(256)) * 40  # 10,240 bytes
    result = post(sender, serve(answer(500, body)).url())
    assert result.response_body == body[:RESPONSE_BODY_LIMIT]


def test_a_chunked_response_is_read_and_the_connection_reused(serve, sender) -> None:
    def chunked(sock: socket.socket, request: Request, receiver: Receiver) -> bool:
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        )
        return True

    receiver = serve(chunked)
    assert post(sender, receiver.url()).response_body == b"hello world"
    assert post(sender, receiver.url()).response_body == b"hello world"
    assert receiver.connections == 1


# --- the private network guard -------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_private_addresses_are_blocked_before_any_request(serve, host: str) -> None:
    receiver = serve()
    guarded = Sender(version="1", allow_private_networks=False).start()
    result = post(guarded, receiver.url().replace("127.0.0.1", host))
    assert result.status_code is None
    assert result.error == f"blocked: {host} resolves to a private address"
    time.sleep(0.1)
    assert receiver.connections == 0
    assert receiver.requests == []


def test_private_addresses_are_allowed_when_configured(serve) -> None:
    receiver = serve()
    result = post(Sender(version="1", allow_private_networks=True).start(), receiver.url())
    assert result.status_code == 200
    assert len(receiver.requests) == 1


@pytest.mark.parametrize(
    ("ip", "public"),
    [
        ("93.184.216.34", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("172.16.5.4", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:8.8.8.8", True),
        ("64:ff9b::a00:1", False),
        ("not an ip", False),
    ],
)
def test_is_public_address(ip: str, public: bool) -> None:
    assert is_public_address(ip) is public


def test_resolve_blocked_reason() -> None:
    assert resolve_blocked_reason("localhost") == "blocked: localhost resolves to a private address"
    assert resolve_blocked_reason("10.1.2.3") is not None
    assert resolve_blocked_reason("8.8.8.8") is None
    assert resolve_blocked_reason("no-such-host.invalid") is None  # fails later, as an error


def test_a_bug_in_sending_is_an_internal_error_and_fatal(monkeypatch) -> None:
    from deliveries.lifecycle.retry import Outcome, classify
    from deliveries.results import ErrorKind

    async def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    sender = Sender(version="1", allow_private_networks=True).start()
    monkeypatch.setattr(sender, "_exchange", broken)
    try:
        result = post(sender, "http://127.0.0.1:9/")
    finally:
        sender.close()
    assert result.error_kind is ErrorKind.INTERNAL
    assert result.error == "internal error: RuntimeError: a bug"
    verdict = classify(status_code=None, error_kind=result.error_kind, error=result.error)
    assert verdict.outcome is Outcome.FATAL


def test_an_out_of_range_port_is_an_invalid_url(sender) -> None:
    result = post(sender, "http://example.com:99999/x")
    assert result.error is not None and result.error.startswith("invalid URL: ")


def test_an_internationalised_host_is_looked_up_and_sent_as_its_idna_2008_a_label(serve) -> None:
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    receiver = serve()
    sender = Sender(version="1", allow_private_networks=True, resolve=resolve).start()
    try:
        result = post(sender, f"http://straße.de:{receiver.port}/hook")
    finally:
        sender.close()
    assert result.status_code == 200
    assert asked == ["xn--strae-oqa.de"]  # not strasse.de, as IDNA 2003 has it
    assert receiver.requests[0].header("Host") == [f"xn--strae-oqa.de:{receiver.port}"]
