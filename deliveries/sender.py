"""The HTTP transport: one POST per attempt, never raising, bounded in time and memory.

Built on aiohttp in one event-loop thread (uvloop) per worker process: an attempt waiting on a
slow receiver costs a coroutine, not a thread, and a POST costs a fraction of the CPU
of urllib3 and threads (bench/ceilings.py measures the client's ceiling). Pure: no
Django; callers pass in the URL, signed body, headers and timeout, and get a frozen
`SendResult`.

What bounds an attempt:
- `ClientTimeout(total=timeout)`: one deadline for the whole attempt, DNS, connect,
  TLS, sending the body and reading the answer included;
- the SSRF guard: with `allow_private_networks=False` the connector's resolver
  (`_PublicResolver`) resolves the host, refuses it if any address is private, and
  hands the connector exactly the addresses it checked (no second lookup that DNS
  rebinding could answer differently). IP literals never reach a resolver in aiohttp,
  so they are checked before the request;
- at most RESPONSE_BODY_LIMIT bytes of the body are read, header lines and fields are
  capped, nothing is decompressed, redirects are not followed;
- bounded pools: at most `limit` connections in all (and `limit_per_host` per host, if given),
  idle ones closed after KEEPALIVE_SECONDS.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeGuard

import aiohttp
import uvloop
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from core import network
from deliveries.retry import ErrorKind

logger = logging.getLogger(__name__)

RESPONSE_BODY_LIMIT = 4096  # bytes kept per attempt; the contract shows the first 4 KiB
# Headers the sender owns; a caller's copy is dropped rather than sent twice.
OWN_HEADERS = frozenset(
    {"content-type", "user-agent", "content-length", "host", "transfer-encoding", "connection"}
)
# Longest status line or header line, and header field, read from a receiver: a
# receiver cannot make the worker buffer more than this per header.
MAX_LINE_SIZE = 8190
MAX_FIELD_SIZE = 8190
KEEPALIVE_SECONDS = 15.0  # idle keep-alive connections are closed after this
# Threads for DNS lookups per process: distinct hosts looked up at once. asyncio's default
# pool has min(32, cores + 4): six hosts with hanging DNS stalled every new connection.
DNS_THREADS = 64


@dataclass(frozen=True, slots=True)
class SendResult:
    """What one attempt produced. Exactly one of `status_code` and `error_kind` is set:
    once a status line has arrived the receiver has answered, whatever happens to the
    rest of its body."""

    status_code: int | None
    error: str | None  # human readable: "timeout", "connection error: …", "blocked: …"
    response_body: bytes  # at most RESPONSE_BODY_LIMIT bytes
    retry_after: str | None  # the raw Retry-After header; retry.parse_retry_after reads it
    duration_ms: int
    error_kind: ErrorKind | None = None

    @classmethod
    def failed(cls, kind: ErrorKind, error: str, duration_ms: int = 0) -> SendResult:
        return cls(None, error, b"", None, duration_ms, kind)


class AddressBlocked(Exception):
    """The SSRF guard refused the host; its message is the stored error."""


class _PublicResolver(AbstractResolver):
    """Resolves a host, refuses it if any address is not public, and returns exactly the
    addresses it checked: the connector connects to those, with no second lookup.

    Lookups block a thread for as long as the host's DNS takes (the attempt's deadline
    ends the wait, not the lookup), so a receiver with slow DNS must not take the threads
    every other endpoint needs: lookups run in a pool of their own (DNS_THREADS), and
    concurrent lookups of one host share one thread.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(DNS_THREADS, thread_name_prefix="homing-dns")
        self._pending: dict[tuple[str, int], asyncio.Future[list[str]]] = {}

    def _lookup(self, host: str, port: int) -> asyncio.Future[list[str]]:
        key = (host, port)
        future = self._pending.get(key)
        if future is None:
            loop = asyncio.get_running_loop()
            future = loop.run_in_executor(self._pool, network.resolve_addresses, host, port)
            self._pending[key] = future
            future.add_done_callback(lambda done: self._forget(key, done))
        return future

    def _forget(self, key: tuple[str, int], done: asyncio.Future[list[str]]) -> None:
        self._pending.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: waiters that timed out may be gone

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        try:
            # Shielded: one waiter reaching its deadline must not cancel the others' lookup.
            addresses = await asyncio.shield(self._lookup(host, port))
        except (OSError, UnicodeError) as exc:
            raise OSError(f"cannot resolve {host}: {exc}") from exc
        reason = network.blocked_reason(host, addresses)
        if reason:
            raise AddressBlocked(reason)
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in addresses
        ]

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class Sender:
    """POSTs webhooks from one event-loop thread; one instance per process.

    `post()` is a coroutine for code running on `loop`; `send()` is the same from any
    other thread (tests, benchmarks), waiting for the answer.
    """

    def __init__(
        self,
        *,
        version: str,
        allow_private_networks: bool,
        limit: int = 1000,
        limit_per_host: int = 200,
    ) -> None:
        self.user_agent = f"Homing/{version}"
        self.public_only = not allow_private_networks
        self._limit = limit
        self._limit_per_host = limit_per_host
        self._session: aiohttp.ClientSession | None = None
        # uvloop: the loop's own work per request (scheduling, transports) in C, not
        # Python (a plain aiohttp client here: 117-139 µs of CPU per POST against 129-147
        # on asyncio's loop, three pairs on a loaded machine).
        self.loop = uvloop.new_event_loop()
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        """The event loop's thread, once started (its owner watches it)."""
        return self._thread

    def start(self) -> Sender:
        """Start the event loop's thread (its owner calls this once, then `close`)."""
        if self._thread is not None:
            raise RuntimeError("the sender is already started")
        self._thread = threading.Thread(target=self._run, name="homing-sender", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _session_for_loop(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                limit_per_host=self._limit_per_host,
                keepalive_timeout=KEEPALIVE_SECONDS,
                resolver=_PublicResolver() if self.public_only else None,
                use_dns_cache=not self.public_only,  # every new connection is checked
                enable_cleanup_closed=True,  # abort TLS sockets a receiver never closes
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                max_line_size=MAX_LINE_SIZE,
                max_field_size=MAX_FIELD_SIZE,
                skip_auto_headers=("Accept", "Accept-Encoding"),
                cookie_jar=aiohttp.DummyCookieJar(),  # receivers' cookies are not kept
            )
        return self._session

    def send(
        self, *, url: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> SendResult:
        future = asyncio.run_coroutine_threadsafe(
            self.post(url=url, body=body, headers=headers, timeout=timeout), self.loop
        )
        return future.result()

    async def post(
        self, *, url: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> SendResult:
        """The attempt's result; never raises (but lets cancellation through)."""
        started = time.monotonic()
        try:
            status, content, retry_after = await self._exchange(url, body, headers, timeout)
        except Exception as exc:  # the contract: post() never raises for an answer
            kind, error = describe_error(exc)
            return SendResult.failed(kind, error, int((time.monotonic() - started) * 1000))
        duration_ms = int((time.monotonic() - started) * 1000)
        return SendResult(status, None, content, retry_after, duration_ms)

    async def _exchange(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes, str | None]:
        target = _checked_target(url, public_only=self.public_only)
        async with self._session_for_loop().post(
            target,
            data=body,
            headers=self._headers(headers),
            allow_redirects=False,  # a 3xx is the receiver's answer, never followed
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            content = await _read_bounded(response)
            return response.status, content, response.headers.get("Retry-After")

    def _headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        merged = {k: v for k, v in headers.items() if k.lower() not in OWN_HEADERS}
        merged["Content-Type"] = "application/json"
        merged["User-Agent"] = self.user_agent
        return merged

    def close(self, timeout: float = 5.0) -> None:
        """Close every connection and stop the loop thread, waiting `timeout` seconds at
        most for each (a stuck loop is left to the process's exit)."""
        if self.loop.is_closed():
            return
        thread = self._thread
        if thread is not None and thread.is_alive():
            if self._session is not None:
                session, self._session = self._session, None
                closing = asyncio.run_coroutine_threadsafe(session.close(), self.loop)
                with contextlib.suppress(Exception):  # TimeoutError: the loop is stuck
                    closing.result(timeout=timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            thread.join(timeout=timeout)
            if thread.is_alive():
                logger.warning("the sender's event loop did not stop within %s s", timeout)
                return
        self.loop.close()


class _InvalidURL(Exception):
    pass


@functools.lru_cache(maxsize=4096)  # an endpoint's URL is checked once, not per attempt
def _checked_target(url: str, *, public_only: bool) -> URL:
    """The URL to POST to; raises _InvalidURL, or AddressBlocked for an IP literal the
    SSRF guard refuses (host names are checked by the resolver, on every connection)."""
    try:
        target = URL(url)
        target.port  # noqa: B018 - an out-of-range port raises here
    except (ValueError, TypeError) as exc:
        raise _InvalidURL(str(exc)) from exc
    if target.scheme not in ("http", "https") or not _valid_host(target.host):
        raise _InvalidURL(f"not an http(s) URL: {url[:200]}")
    if public_only and _is_ip_literal(target.host):
        reason = network.blocked_reason(target.host, [target.host])
        if reason:
            raise AddressBlocked(reason)
    return target


async def _read_bounded(response: aiohttp.ClientResponse) -> bytes:
    """Up to RESPONSE_BODY_LIMIT bytes. Whatever is left unread makes aiohttp close the
    connection instead of reusing it (it would poison the next request)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while size < RESPONSE_BODY_LIMIT:
            chunk = await response.content.read(RESPONSE_BODY_LIMIT - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if response.content.at_eof():  # the whole body is in: no read to learn it
                break
    except (TimeoutError, aiohttp.ClientError, OSError):
        pass  # cut short (timeout, reset, bad chunking): the status stands
    if size >= RESPONSE_BODY_LIMIT and not response.content.at_eof():
        response.close()  # more is coming that we will not read
    return b"".join(chunks)


def _valid_host(host: str | None) -> TypeGuard[str]:
    return bool(host) and not any(c.isspace() or ord(c) < 32 for c in host or "")


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def describe_error(exc: BaseException) -> tuple[ErrorKind, str]:
    """The error kind retry.classify reads, and the text stored on the attempt."""
    if isinstance(exc, AddressBlocked):
        return ErrorKind.BLOCKED, str(exc)
    if isinstance(exc, (_InvalidURL, aiohttp.InvalidURL)):
        return ErrorKind.INVALID_URL, f"invalid URL: {exc}"
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return ErrorKind.TIMEOUT, "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, AddressBlocked):
        return ErrorKind.BLOCKED, str(exc.os_error)
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
        return ErrorKind.TLS, f"TLS error: {_innermost(exc)}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ErrorKind.CONNECTION, f"connection error: {_os_error_text(exc.os_error)}"
    if isinstance(exc, (aiohttp.ClientError, OSError, UnicodeError)):
        return ErrorKind.CONNECTION, f"connection error: {_innermost(exc)}"
    return ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def _os_error_text(exc: OSError) -> str:
    # "[Errno 111] Connect call failed ('1.2.3.4', 80)" says less than "Connection refused"
    if exc.errno is not None and not isinstance(exc, socket.gaierror):
        return os.strerror(exc.errno)
    return str(exc) or type(exc).__name__


def _innermost(exc: BaseException) -> Any:
    inner = getattr(exc, "os_error", None) or exc.__cause__ or exc
    return str(inner) or type(inner).__name__
