"""One deadline for the whole attempt: whichever stage stalls (DNS, connect, TLS,
sending the body, reading the answer), the attempt ends at the timeout + a margin."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from deliveries.results import ErrorKind
from deliveries.transport import sender as sender_module
from deliveries.transport.sender import Sender
from tests.receivers import Receiver

TIMEOUT = 1.0
MARGIN = 3.0  # generous (the machine is shared), and still under every stall's 5 s or more


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.create_server(("127.0.0.1", 0), backlog=1)
    yield sock
    sock.close()


def timed_post(sender: Sender, url: str, body: bytes = b"{}"):
    started = time.monotonic()
    result = sender.send(url=url, body=body, headers={}, timeout=TIMEOUT)
    return result, time.monotonic() - started


def accept_forever(listener: socket.socket, serve) -> list[socket.socket]:
    kept: list[socket.socket] = []

    def run() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            kept.append(conn)
            if serve is not None:  # None: hold the connection, answer nothing
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=run, daemon=True).start()
    return kept


def test_a_stalled_dns_lookup_ends_at_the_deadline(monkeypatch) -> None:
    def slow_resolve(host: str, port: int | None = None) -> list[str]:
        time.sleep(5)
        return ["93.184.216.34"]

    monkeypatch.setattr(sender_module.network, "resolve_addresses", slow_resolve)
    guarded = Sender(version="1", allow_private_networks=False).start()
    try:
        result, took = timed_post(guarded, "http://slow-dns.example/hook")
    finally:
        guarded.close()
    assert result.error_kind is ErrorKind.TIMEOUT and result.error == "timeout"
    assert took < TIMEOUT + MARGIN


def test_a_stalled_connect_ends_at_the_deadline(listener) -> None:
    # Fill the backlog of a listener that never accepts: further SYNs go unanswered.
    fillers = []
    port = listener.getsockname()[1]
    for _ in range(8):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    sender = Sender(version="1", allow_private_networks=True).start()
    try:
        result, took = timed_post(sender, f"http://127.0.0.1:{port}/hook")
    finally:
        sender.close()
        for s in fillers:
            s.close()
    assert result.status_code is None
    assert took < TIMEOUT + MARGIN


def test_a_server_that_never_speaks_tls_ends_at_the_deadline(listener) -> None:
    accept_forever(listener, lambda conn: time.sleep(10))
    sender = Sender(version="1", allow_private_networks=True).start()
    try:
        result, took = timed_post(sender, f"https://127.0.0.1:{listener.getsockname()[1]}/")
    finally:
        sender.close()
    assert result.error_kind is ErrorKind.TIMEOUT
    assert took < TIMEOUT + MARGIN


def test_a_server_that_stops_reading_the_body_ends_at_the_deadline(listener) -> None:
    listener_conns = accept_forever(listener, lambda conn: time.sleep(10))
    sender = Sender(version="1", allow_private_networks=True).start()
    try:
        result, took = timed_post(
            sender, f"http://127.0.0.1:{listener.getsockname()[1]}/", body=b"x" * 20_000_000
        )
    finally:
        sender.close()
    assert listener_conns, "the request reached the server"
    assert result.error_kind is ErrorKind.TIMEOUT
    assert took < TIMEOUT + MARGIN


def test_a_trickled_response_body_ends_at_the_deadline(listener) -> None:
    def trickle(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(100):
            try:
                conn.sendall(b"x")
            except OSError:
                return
            time.sleep(0.2)

    accept_forever(listener, trickle)
    sender = Sender(version="1", allow_private_networks=True).start()
    try:
        result, took = timed_post(sender, f"http://127.0.0.1:{listener.getsockname()[1]}/")
    finally:
        sender.close()
    assert result.status_code == 200  # the receiver answered; the body was cut short
    assert took < TIMEOUT + MARGIN


def test_hanging_attempts_cost_coroutines_not_threads(listener) -> None:
    listener.listen(1024)
    accept_forever(listener, None)
    sender = Sender(version="1", allow_private_networks=True).start()
    threads_before = threading.active_count()

    async def many() -> list:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        return await asyncio.gather(
            *(sender.post(url=url, body=b"{}", headers={}, timeout=TIMEOUT) for _ in range(500))
        )

    try:
        results = asyncio.run_coroutine_threadsafe(many(), sender.loop).result(timeout=30)
    finally:
        sender.close()
    assert all(r.status_code is None for r in results)
    assert threading.active_count() - threads_before < 50


def test_hosts_with_hanging_dns_do_not_stall_lookups_of_other_hosts(monkeypatch) -> None:
    lookups: list[str] = []

    def resolve(host: str, port: int | None = None) -> list[str]:
        lookups.append(host)
        if host.startswith("hanging-"):
            time.sleep(3)
        return ["127.0.0.1"]

    monkeypatch.setattr(sender_module.network, "resolve_addresses", resolve)
    monkeypatch.setattr(sender_module.network, "blocked_reason", lambda host, addresses: None)
    receiver = Receiver().start()
    guarded = Sender(version="1", allow_private_networks=False).start()
    try:
        # 20 hanging hosts, 10 attempts each: more than asyncio's default pool has threads.
        hanging = [
            asyncio.run_coroutine_threadsafe(
                guarded.post(
                    url=f"http://hanging-{n % 20}.example/hook", body=b"{}", headers={}, timeout=2
                ),
                guarded.loop,
            )
            for n in range(200)
        ]
        time.sleep(0.2)
        healthy = receiver.url.replace("127.0.0.1", "healthy.example")
        result, took = timed_post(guarded, healthy)
        assert result.status_code == 200 and took < 1.5  # behind the hanging ones: 2 s
        assert all(f.result(timeout=5).error_kind is ErrorKind.TIMEOUT for f in hanging)
    finally:
        guarded.close()
        receiver.stop()
    # One lookup per hanging host, shared by its ten attempts.
    assert sorted(h for h in lookups if h.startswith("hanging-")) == sorted(
        f"hanging-{n}.example" for n in range(20)
    )
