"""HTTP/1.1 as the sender speaks it: one POST at a time per connection, kept alive between.

Why not a general client: with 50 POSTs under way on one uvloop loop, aiohttp's costs
73-80 µs of CPU per POST here and the Sender built on this module 26-36 µs, signing
headers and deadlines included (`python bench/http_clients.py --coroutines 50 --requests
20000`); the POST was over half of what a delivery cost the worker. The sender needs
little of HTTP: a POST whose body is in memory, then a status line, headers and the
first RESPONSE_BODY_LIMIT bytes of a body; no redirects, cookies, decompression,
proxies, pipelining or 100-continue. httptools (llhttp, the parser Node.js uses) reads
the answer.

What a receiver cannot do to a connection:
- make it buffer more than HEAD_LIMIT bytes of status line and headers, or more than
  RESPONSE_BODY_LIMIT of body (the connection is dropped once the limit is read);
- make it parse more than ANSWER_LIMIT bytes of one answer, whatever the phase (chunk
  framing and trailers included): bytes are counted before the parser sees them, and
  past the limit the connection is dropped and the answer judged on its status;
- leave half an answer behind for the next request: a connection goes back to the pool
  only after a complete answer that allows keep-alive, and bytes that arrive while it
  sits idle close it;
- hold it past the caller's deadline: callers bound every await (`asyncio.timeout`) and
  a connection whose exchange did not finish is aborted, never reused.
A request is said again on a new connection only when it provably never went out: the
pooled connection was closed, or its receiver's close (or stray bytes) already waited
to be read when the request was about to be written (NotSent). Once written, a request
the receiver closes without answering is a failed attempt: it may have been read and
acted on, and saying it again within the attempt would deliver it twice.
"""

from __future__ import annotations

import asyncio
import select
import time
from collections.abc import Iterable
from typing import cast

import httptools

RESPONSE_BODY_LIMIT = 4096  # bytes kept per answer; the contract shows the first 4 KiB
# Status line and headers: more than any receiver needs, little enough to hold per
# connection (aiohttp's defaults allow 8190 per line and per field).
HEAD_LIMIT = 65536
# Everything one answer may make the parser read: head, body up to the part kept, chunk
# framing and trailers. httptools builds a header or trailer value with `bytes +=`: an
# endless trailer cost seconds of the loop's CPU that every attempt shares (48 MB: +80 MB).
ANSWER_LIMIT = HEAD_LIMIT + RESPONSE_BODY_LIMIT
KEEPALIVE_SECONDS = 15.0  # idle keep-alive connections are closed after this


class ReceiverClosed(ConnectionError):
    """The receiver closed the connection before its status line and headers were in."""


class NotSent(ReceiverClosed):
    """The connection was closed, or closing, before a byte of the request was written."""


class MalformedAnswer(ConnectionError):
    """Bytes that are not an HTTP/1.1 answer (or one over HEAD_LIMIT)."""


class Answer:
    """What a receiver answered: its status, the Retry-After header, the body's start."""

    __slots__ = ("body", "complete", "retry_after", "status")

    def __init__(self) -> None:
        self.status = 0
        self.retry_after: str | None = None
        self.body = bytearray()
        self.complete = False  # the whole body was read: the connection may be reused


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection to a receiver and the parser of its answers."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._answer = Answer()
        self._head: asyncio.Future[Answer] | None = None  # set once the headers are in
        self._done: asyncio.Future[Answer] | None = None  # set once reading stops
        self._fed = 0  # bytes of the current answer given to the parser
        self._informational = False
        self._keep_alive = False
        self.closed = False
        self.idle_since = 0.0
        self._poller: select.poll | None = None  # quiet()'s, made on its first call

    # --- the caller's side ------------------------------------------------------------

    def send(self, request: bytes) -> asyncio.Future[Answer]:
        """Write one request; the future is the answer's head (status and headers)."""
        transport = self._transport
        if transport is None or not self.open:
            raise NotSent("the connection closed before the request")
        self._answer = Answer()
        self._head = self._loop.create_future()
        self._done = self._loop.create_future()
        self._fed = 0
        transport.write(request)
        return self._head

    def body(self) -> asyncio.Future[Answer]:
        """The answer once its body is read: whole, cut at the limit, or cut by a close."""
        assert self._done is not None, "send() first"
        return self._done

    @property
    def reusable(self) -> bool:
        # Bytes of the request still unsent: the receiver answered before reading the
        # whole body, and would read its rest as the next request.
        unsent = self._transport is None or self._transport.get_write_buffer_size() > 0
        return self._answer.complete and self._keep_alive and not self.closed and not unsent

    @property
    def open(self) -> bool:
        transport = self._transport
        return not self.closed and transport is not None and not transport.is_closing()

    def quiet(self) -> bool:
        """Nothing waits to be read on an idle connection: no close or stray bytes that
        arrived before the loop got to them (a request written now would cross them)."""
        assert self._transport is not None, "connected first"
        if self._poller is None:  # once per connection: a pooled one is asked every reuse
            self._poller = select.poll()  # not select(): descriptors above 1024
            self._poller.register(self._transport.get_extra_info("socket").fileno(), select.POLLIN)
        return not self._poller.poll(0)

    def abort(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.abort()

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ReceiverClosed(_closed_text(exc)))

    def data_received(self, data: bytes) -> None:
        if self._done is None or self._done.done():
            self.abort()  # bytes nobody asked for: the next answer would be poisoned
            return
        room = ANSWER_LIMIT - self._fed
        cut = len(data) > room
        if cut:
            data = data[:room]
        self._fed += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # a 101: the status stands, nothing follows
            self._fail(MalformedAnswer("the receiver switched protocols"))
            self.abort()
            return
        except httptools.HttpParserError as exc:
            self._fail(MalformedAnswer(f"malformed answer: {exc}"))
            self.abort()
            return
        if self._head is not None and not self._head.done():
            if self._fed > HEAD_LIMIT:
                self._fail(MalformedAnswer(f"the answer's headers exceed {HEAD_LIMIT} bytes"))
                self.abort()
        elif cut:  # past the bound after the head: its status stands, the rest is unread
            self._stop_reading()
            self.abort()

    # --- httptools callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._answer.complete:  # a second answer to one request: poisoned
            raise MalformedAnswer("more than one answer to a request")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._answer.retry_after is None and name.lower() == b"retry-after":
            self._answer.retry_after = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        # 1xx answers (103 Early Hints…) come before the real one: keep waiting.
        self._informational = 100 <= status < 200 and status != 101
        if self._informational:
            self._answer.retry_after = None
            return
        self._answer.status = status
        if self._head is not None and not self._head.done():
            self._head.set_result(self._answer)

    def on_body(self, chunk: bytes) -> None:
        room = RESPONSE_BODY_LIMIT - len(self._answer.body)
        if room > 0:
            self._answer.body += chunk[:room]
        if len(self._answer.body) >= RESPONSE_BODY_LIMIT:
            self._stop_reading()  # the rest is not read: the connection will be dropped

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        self._answer.complete = True
        self._keep_alive = self._parser.should_keep_alive()
        self._stop_reading()

    # --- internals ------------------------------------------------------------------------

    def _stop_reading(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(self._answer)

    def _fail(self, error: Exception) -> None:
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
            self._done = None  # no body to wait for; nobody will ask
        elif self._done is not None and not self._done.done():
            self._done.set_result(self._answer)  # the status stands; the body is cut


# (scheme, host, port, client certificate fingerprint or ""): a connection is reused only
# by requests that would have made exactly the same one, the certificate it presented in
# its handshake included (client_tls.py).
PoolKey = tuple[str, str, int, str]


class Pool:
    """Idle keep-alive connections by PoolKey, most recently used first."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._idle: dict[PoolKey, list[Connection]] = {}
        self._sweep: asyncio.TimerHandle | None = None

    def take(self, key: PoolKey) -> Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            fresh = now - connection.idle_since < KEEPALIVE_SECONDS
            if connection.open and fresh and connection.quiet():
                return connection
            connection.abort()
        return None

    def put(self, key: PoolKey, connection: Connection) -> None:
        if not connection.reusable:
            connection.abort()
            return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(key, []).append(connection)
        if self._sweep is None:
            self._sweep = self._loop.call_later(KEEPALIVE_SECONDS, self._close_stale)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for connection in _all(self._idle.values()):
            connection.abort()
        self._idle.clear()

    def _close_stale(self) -> None:
        self._sweep = None
        now = time.monotonic()
        for key, idle in list(self._idle.items()):
            fresh = [c for c in idle if not c.closed and now - c.idle_since < KEEPALIVE_SECONDS]
            for connection in idle:
                if connection not in fresh:
                    connection.abort()
            if fresh:
                self._idle[key] = fresh
            else:
                del self._idle[key]
        if self._idle:
            self._sweep = self._loop.call_later(KEEPALIVE_SECONDS / 3, self._close_stale)


def request_bytes(
    *, request_target: str, host: str, headers: Iterable[tuple[str, str]], body: bytes
) -> bytes:
    """A POST's bytes. Header names and values must already be free of CR, LF and NUL."""
    lines = [f"POST {request_target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _all(groups: Iterable[list[Connection]]) -> list[Connection]:
    return [connection for group in groups for connection in group]


def _closed_text(exc: Exception | None) -> str:
    if exc is None:
        return "the receiver closed the connection without an answer"
    return f"the connection was lost: {exc}"
