"""The HTTP transport: one POST per attempt, never raising, bounded in time and memory.

Built on urllib3 (bench/http_clients.py: about 2.5 times less CPU per POST than requests,
and thread-safe connection pools unlike bare http.client). Pure: no Django; callers
pass in the URL, signed body, headers and timeout, and get a frozen `SendResult`.

Two things urllib3 does not give us are added here:
- a deadline for the *whole* attempt. `Timeout(total=...)` bounds each socket wait,
  not the sum of them, so a receiver trickling a byte at a time could hold a worker
  for ever. A single watchdog thread shuts the socket down at the deadline;
- the SSRF guard: with `allow_private_networks=False` every new connection resolves
  the host, refuses it if any address is private, and connects to exactly the
  addresses it checked (no second lookup that DNS rebinding could answer differently).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    LocationValueError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util import connection as urllib3_connection
from urllib3.util import parse_url

from core import network

RESPONSE_BODY_LIMIT = 4096  # bytes kept per attempt; the contract shows the first 4 KiB
# Headers the sender owns; a caller's copy is dropped rather than sent twice.
OWN_HEADERS = frozenset(
    {"content-type", "user-agent", "content-length", "host", "transfer-encoding", "connection"}
)
# The watchdog sweeps at most this often: deadlines may overrun by up to this much, in
# exchange for not waking once per request at 1,000 requests/s.
WATCHDOG_GRANULARITY = 0.05


@dataclass(frozen=True)
class SendResult:
    """What one attempt produced. Exactly one of `status_code` and `error` is set:
    once a status line has arrived the receiver has answered, whatever happens to the
    rest of its body."""

    status_code: int | None
    error: str | None  # "timeout", "connection error: …", "TLS error: …", "blocked: …"
    response_body: bytes  # at most RESPONSE_BODY_LIMIT bytes
    retry_after: str | None  # the raw Retry-After header; retry.parse_retry_after reads it
    duration_ms: int


class AddressBlocked(Exception):
    """Deliberately not an OSError: urllib3 must not wrap it as a connection error."""


# --- the deadline watchdog ---------------------------------------------------------


class _Attempt:
    __slots__ = ("deadline", "done", "expired", "sock")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.sock: socket.socket | None = None
        self.expired = False
        self.done = False


def _shutdown(sock: socket.socket) -> None:
    # socket.socket.shutdown, not SSLSocket.shutdown: the latter drops its SSL object,
    # which the thread blocked in recv() is still using. Shutting down the fd makes
    # that recv() return at once, and the sending thread sees a broken connection.
    with contextlib.suppress(OSError):  # already closed: nothing left to interrupt
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """One daemon thread per process that interrupts attempts past their deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Attempt]] = []
        self._order = itertools.count()  # tie-breaker: _Attempt is not orderable
        self._thread: threading.Thread | None = None

    def watch(self, deadline: float) -> _Attempt:
        attempt = _Attempt(deadline)
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._order), attempt))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="homing-deadlines", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is attempt:
                self._cond.notify()  # earlier than what the thread is sleeping towards
        return attempt

    def bind(self, attempt: _Attempt, sock: socket.socket | None) -> None:
        with self._cond:
            attempt.sock = sock
            if attempt.expired and sock is not None:
                _shutdown(sock)

    def finish(self, attempt: _Attempt) -> bool:
        """Stop watching; True if the deadline struck (the socket may be shut down)."""
        with self._cond:
            attempt.done = True
            attempt.sock = None
            return attempt.expired

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].done or self._heap[0][0] <= now):
                    _, _, attempt = heapq.heappop(self._heap)
                    if not attempt.done:
                        attempt.expired = True
                        if attempt.sock is not None:
                            _shutdown(attempt.sock)
                wait = self._heap[0][0] - now if self._heap else None
                self._cond.wait(None if wait is None else max(wait, WATCHDOG_GRANULARITY))


_watchdog = _Watchdog()


def _reset_watchdog_after_fork() -> None:
    # A forked child (Celery prefork) inherits the watchdog but not its thread: start
    # afresh, or deadlines would silently stop being enforced in the child.
    global _watchdog
    _watchdog = _Watchdog()


os.register_at_fork(after_in_child=_reset_watchdog_after_fork)
# The attempt the current thread is sending, for the connection classes below.
_current = threading.local()


# --- connection classes ------------------------------------------------------------


class _WatchedMixin:
    """Hands the connected socket to the watchdog once the request is on the wire."""

    sock: socket.socket | None

    def request(self, *args: Any, **kwargs: Any) -> None:
        super().request(*args, **kwargs)  # type: ignore[misc]
        attempt = getattr(_current, "attempt", None)
        if attempt is not None:
            _watchdog.bind(attempt, self.sock)


class _PublicOnlyMixin:
    """Connects only to public addresses, and only to the ones it checked."""

    host: str
    port: int
    timeout: Any
    source_address: tuple[str, int] | None
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        try:
            addresses = network.resolve_addresses(self.host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]
        reason = network.blocked_reason(self.host, addresses)
        if reason:
            raise AddressBlocked(reason)
        error: OSError = OSError(f"{self.host} resolves to no address")
        for address in addresses:
            try:
                return urllib3_connection.create_connection(
                    (address, self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as exc:
                raise ConnectTimeoutError(self, f"connecting to {self.host} timed out") from exc
            except OSError as exc:
                error = exc
        raise NewConnectionError(  # type: ignore[arg-type]
            self, f"Failed to establish a new connection: {error}"
        ) from error


class _HTTPConnection(_WatchedMixin, HTTPConnection):
    pass


class _HTTPSConnection(_WatchedMixin, HTTPSConnection):
    pass


class _PublicHTTPConnection(_PublicOnlyMixin, _HTTPConnection):
    pass


class _PublicHTTPSConnection(_PublicOnlyMixin, _HTTPSConnection):
    pass


def _pool_classes(*, public_only: bool) -> dict[str, type[HTTPConnectionPool]]:
    http_cls = _PublicHTTPConnection if public_only else _HTTPConnection
    https_cls = _PublicHTTPSConnection if public_only else _HTTPSConnection
    return {
        "http": type("HomingHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_cls}),
        "https": type("HomingHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_cls}),
    }


# --- the sender ----------------------------------------------------------------------


class Sender:
    """POSTs webhooks; one instance per process, shared by every sending thread.

    `maxsize` is how many idle keep-alive connections are kept per host: size it to the
    number of threads that may send to one host at once. Beyond it, extra connections
    are opened and discarded after use (block=False), so no thread waits on the pool.
    `num_pools` bounds how many hosts keep connections (least recently used go first).
    """

    def __init__(
        self,
        *,
        version: str,
        allow_private_networks: bool,
        maxsize: int = 16,
        num_pools: int = 512,
    ) -> None:
        self.user_agent = f"Homing/{version}"
        self._pools = urllib3.PoolManager(num_pools=num_pools, maxsize=maxsize, block=False)
        self._max_targets = num_pools * 4
        # URL -> (its host's pool, request target): PoolManager would parse the URL and
        # build a pool key on every request (~7% of a send's CPU). It drops the pools it
        # evicts without closing them, so a cached pool stays usable; the cache is
        # bounded and cleared when full.
        self._targets: dict[str, tuple[HTTPConnectionPool, str]] = {}
        # PoolManager builds pools from this per-instance mapping.
        self._pools.pool_classes_by_scheme = _pool_classes(  # type: ignore[assignment]
            public_only=not allow_private_networks
        )

    def send(
        self, *, url: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> SendResult:
        started = time.monotonic()
        attempt = _watchdog.watch(started + timeout)
        _current.attempt = attempt
        try:
            status, error, content, retry_after = self._exchange(
                url, body, self._headers(headers), timeout
            )
        finally:
            _current.attempt = None
        duration_ms = int((time.monotonic() - started) * 1000)
        if status is None and attempt.expired:
            error = "timeout"  # whatever the interrupted socket call reported
        return SendResult(status, error, content, retry_after, duration_ms)

    def close(self) -> None:
        self._pools.clear()
        self._targets.clear()

    def _pool_for(self, url: str) -> tuple[HTTPConnectionPool, str]:
        cached = self._targets.get(url)
        if cached is not None:
            return cached
        parsed = parse_url(url)
        pool = self._pools.connection_from_host(
            parsed.host, port=parsed.port, scheme=parsed.scheme or "http"
        )
        if len(self._targets) >= self._max_targets:
            self._targets.clear()
        self._targets[url] = (pool, parsed.request_uri)
        return pool, parsed.request_uri

    def _headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        merged = {k: v for k, v in headers.items() if k.lower() not in OWN_HEADERS}
        merged["Content-Type"] = "application/json"
        merged["User-Agent"] = self.user_agent
        return merged

    def _exchange(
        self, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int | None, str | None, bytes, str | None]:
        attempt = _current.attempt
        try:
            pool, target = self._pool_for(url)
            response = pool.urlopen(
                "POST",
                target,
                assert_same_host=False,
                body=body,
                headers=headers,
                redirect=False,  # a 3xx is the receiver's answer, never followed
                retries=False,  # the database counts attempts, not urllib3
                timeout=urllib3.Timeout(total=timeout),
                preload_content=False,
                decode_content=False,
            )
        except Exception as exc:  # the contract: send() never raises
            _watchdog.finish(attempt)
            return None, describe_error(exc), b"", None
        if attempt.expired:
            # Cut off mid-headers: http.client takes EOF as the end of the header block
            # and would hand us a status the receiver may never have finished sending.
            _watchdog.finish(attempt)
            response.close()
            response.release_conn()
            return None, "timeout", b"", None
        content, complete = _read_bounded(response)
        expired = _watchdog.finish(attempt)
        if complete and not expired:
            response.release_conn()  # fully drained: safe to reuse for keep-alive
        else:
            # Unread bytes (or a socket the watchdog shut down) would poison the next
            # request on this connection: drop it. The pool opens a fresh one.
            response.close()
            response.release_conn()
        return response.status, None, content, response.headers.get("Retry-After")


def _read_bounded(response: Any) -> tuple[bytes, bool]:
    """Up to RESPONSE_BODY_LIMIT bytes; True if that was the whole body."""
    chunks: list[bytes] = []
    size = 0
    try:
        expected = response.length_remaining
        if expected is not None and expected <= RESPONSE_BODY_LIMIT:
            # The usual small answer with a Content-Length: one read, not a read1 loop
            # ending in an extra empty read (~10% of a send's CPU). The deadline still
            # bounds a receiver that trickles it.
            content = response.read(expected)
            return content, len(content) == expected and response.length_remaining == 0
        while size < RESPONSE_BODY_LIMIT:
            # read1: return what has arrived; read(n) would wait for all n bytes.
            chunk = response.read1(RESPONSE_BODY_LIMIT - size)
            if not chunk:
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
    except Exception:  # cut short: timeout, reset, bad chunking; the status stands
        return b"".join(chunks), False
    # Exactly at the limit: complete only if the Content-Length says nothing is left.
    return b"".join(chunks), response.length_remaining == 0


def describe_error(exc: BaseException) -> str:
    """The error kind and message stored on the attempt; retry.classify reads the kind."""
    if isinstance(exc, AddressBlocked):
        return str(exc)
    if isinstance(exc, LocationValueError):  # before the rest: it is also an HTTPError
        return f"invalid URL: {exc}"
    if isinstance(exc, NewConnectionError):  # also a ConnectTimeoutError: test it first
        # str() is "<connection object>: Failed to ...": keep the part after the repr.
        return f"connection error: {str(exc).split(': ', 1)[-1]}"
    if isinstance(exc, Urllib3Timeout):
        return "timeout"
    if isinstance(exc, SSLError):
        return f"TLS error: {_innermost(exc)}"
    if isinstance(exc, ProtocolError):
        return f"connection error: {_innermost(exc)}"
    if isinstance(exc, (HTTPError, OSError)):
        return f"connection error: {exc}"
    return f"connection error: {type(exc).__name__}: {exc}"


def _innermost(exc: BaseException) -> str:
    # urllib3 wraps (ProtocolError("Connection aborted.", RemoteDisconnected(...)));
    # the wrapped exception is the informative part.
    inner = exc.args[-1] if exc.args and isinstance(exc.args[-1], BaseException) else exc
    return str(inner) or type(inner).__name__
