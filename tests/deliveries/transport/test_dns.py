"""The sender's DNS lookups: one tenant's slow names cannot hold another tenant's
attempts, and a name looked up a moment ago is not looked up again."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter

import pytest

from deliveries.results import ErrorKind
from deliveries.transport import dns
from deliveries.transport.sender import Sender
from tests.scripted_receivers import answer


def settles(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_one_tenants_slow_lookups_do_not_hold_another_tenants(serve) -> None:
    """Alice's 70 endpoints have DNS that hangs; Bob's attempt still goes out."""
    released = threading.Event()
    lock = threading.Lock()
    resolving: Counter[str] = Counter()
    most: Counter[str] = Counter()

    def resolve(host: str, port: int) -> list[str]:
        owner = host.split("-")[0]  # alice-3.example, bob.example
        with lock:
            resolving[owner] += 1
            most[owner] = max(most[owner], resolving[owner])
        try:
            if owner == "alice":
                released.wait(30)
            return ["127.0.0.1"]
        finally:
            with lock:
                resolving[owner] -= 1

    receiver = serve()
    sender = Sender(version="1", allow_private_networks=True, resolve=resolve).start()

    def attempt(host: str, tenant: str, timeout: float):
        url = f"http://{host}:{receiver.port}/hook"
        coroutine = sender.post(url=url, body=b"{}", headers={}, timeout=timeout, tenant=tenant)
        return asyncio.run_coroutine_threadsafe(coroutine, sender.loop)

    try:
        alices = [attempt(f"alice-{n}.example", "alice", 30) for n in range(70)]
        assert settles(lambda: resolving["alice"] >= dns.PER_TENANT)
        bob = attempt("bob.example", "bob", 5).result(10)
        assert (bob.status_code, bob.error) == (200, None)
        # Beyond her threads, Alice's next attempt waits within its own deadline.
        late = attempt("alice-late.example", "alice", 0.3).result(10)
        assert late.error_kind is ErrorKind.TIMEOUT
        assert not any(a.done() for a in alices)  # all still waiting on Alice's DNS
        released.set()
        assert [a.result(30).status_code for a in alices] == [200] * 70
    finally:
        released.set()
        sender.close()
    assert most["alice"] == dns.PER_TENANT
    assert len(receiver.requests) == 71


def test_a_host_looked_up_a_moment_ago_is_not_looked_up_again(serve) -> None:
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    receiver = serve(answer(200, b"ok", Connection="close"))  # each attempt connects anew
    sender = Sender(version="1", allow_private_networks=True, resolve=resolve).start()
    try:
        url = f"http://cached.example:{receiver.port}/hook"
        results = [sender.send(url=url, body=b"{}", headers={}, timeout=5) for _ in range(2)]
    finally:
        sender.close()
    assert [r.status_code for r in results] == [200, 200]
    assert receiver.connections == 2
    assert asked == ["cached.example"]


def test_answers_are_kept_for_a_while_and_failures_not_at_all() -> None:
    now = 0.0
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        if host == "nowhere.example":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return ["192.0.2.1"]

    async def scenario() -> None:
        nonlocal now
        lookups = dns.Lookups(resolve=resolve, clock=lambda: now)
        try:
            assert await lookups.addresses("a.example", 443) == ["192.0.2.1"]
            now = dns.CACHE_SECONDS - 1
            assert await lookups.addresses("a.example", 443) == ["192.0.2.1"]
            now = dns.CACHE_SECONDS + 1
            assert await lookups.addresses("a.example", 443) == ["192.0.2.1"]
            for _ in range(2):
                with pytest.raises(OSError, match=r"cannot resolve nowhere\.example"):
                    await lookups.addresses("nowhere.example", 443)
        finally:
            lookups.close()

    asyncio.run(scenario())
    assert asked == ["a.example", "a.example", "nowhere.example", "nowhere.example"]
