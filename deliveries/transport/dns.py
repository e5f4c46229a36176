"""The sender's DNS lookups, off its event loop: cached, shared, and bounded per tenant.

A lookup holds a thread for as long as the host's DNS takes (an attempt's deadline ends
the attempt's wait, not the lookup), so:
- lookups run in a pool of their own (THREADS): hosts with hanging DNS cannot take the
  threads the rest of the process needs;
- one tenant's lookups hold at most PER_TENANT of those threads; a further one waits for
  one of that tenant's own to end, within its attempt's deadline (the caller's timeout).
  Without it, 70 slow lookups of one tenant's names timed out another tenant's attempts;
- concurrent lookups of one host share one thread, whoever asks;
- answers are kept CACHE_SECONDS (at most CACHE_SIZE names): most attempts go to hosts
  looked up a moment ago. Failures are not kept. The SSRF guard checks the addresses on
  every new connection, cached or not.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from core import network

Resolve = Callable[[str, int], list[str]]

# Distinct hosts looked up at once per process. asyncio's default pool has
# min(32, cores + 4): six hosts with hanging DNS stalled every new connection.
THREADS = 64
# Threads one tenant's lookups may hold: eight tenants with hanging DNS to take them all.
PER_TENANT = 8
CACHE_SECONDS = 30.0  # short: a changed record reaches the sender within half a minute
CACHE_SIZE = 4096  # names; an entry is a few hundred bytes


def system_resolve(host: str, port: int) -> list[str]:
    # Looked up at each call, not bound at import: tests replace network.resolve_addresses.
    return network.resolve_addresses(host, port)


class Lookups:
    """The addresses of a host, for coroutines on one event loop."""

    def __init__(
        self,
        *,
        resolve: Resolve = system_resolve,
        threads: int = THREADS,
        per_tenant: int = PER_TENANT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolve = resolve
        self._per_tenant = per_tenant
        self._clock = clock
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="homing-dns")
        self._pending: dict[tuple[str, int], asyncio.Future[list[str]]] = {}
        self._cache: OrderedDict[tuple[str, int], tuple[float, list[str]]] = OrderedDict()
        self._threads_held: Counter[str] = Counter()  # by tenant
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}  # for a tenant's thread

    async def addresses(self, host: str, port: int, *, tenant: str | None = None) -> list[str]:
        """Every address of `host`, in resolver order; raises OSError naming the host.
        `tenant` None (tests, benchmarks) is not bounded per tenant."""
        key = (host, port)
        while (future := self._pending.get(key)) is None:
            if (cached := self._cached(key)) is not None:
                return cached
            if tenant is None or self._threads_held[tenant] < self._per_tenant:
                future = self._start(key, tenant)
                break
            await self._thread_freed(tenant)
        try:
            # Shielded: one waiter reaching its deadline must not cancel the others' lookup.
            return list(await asyncio.shield(future))
        except (OSError, UnicodeError) as exc:
            raise OSError(f"cannot resolve {host}: {exc}") from exc

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _cached(self, key: tuple[str, int]) -> list[str] | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        expires, addresses = entry
        if self._clock() >= expires:
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return list(addresses)

    def _start(self, key: tuple[str, int], tenant: str | None) -> asyncio.Future[list[str]]:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, self._resolve, *key)
        self._pending[key] = future
        if tenant is not None:
            self._threads_held[tenant] += 1
        future.add_done_callback(lambda done: self._finished(key, tenant, done))
        return future

    def _finished(
        self, key: tuple[str, int], tenant: str | None, done: asyncio.Future[list[str]]
    ) -> None:
        self._pending.pop(key, None)
        if tenant is not None:
            self._threads_held[tenant] -= 1
            if self._threads_held[tenant] <= 0:
                del self._threads_held[tenant]
            for waiter in self._waiting.pop(tenant, ()):
                if not waiter.done():
                    waiter.set_result(None)  # each looks again: one of them gets the thread
        if done.cancelled() or done.exception() is not None:  # retrieved: waiters may be gone
            return
        self._cache[key] = (self._clock() + CACHE_SECONDS, done.result())
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    async def _thread_freed(self, tenant: str) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, set()).add(waiter)
        try:
            await waiter
        finally:
            waiting = self._waiting.get(tenant)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._waiting[tenant]
