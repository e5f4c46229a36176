"""The HTTP transport: one POST per attempt, never raising, bounded in time and memory.

One event-loop thread (uvloop) per worker process: an attempt waiting on a slow receiver
costs a coroutine, not a thread. The HTTP is `http1.py`'s (26-36 µs of CPU per POST
against 73-80 µs for a plain aiohttp client, bench/http_clients.py). Pure: no Django;
callers pass in the URL, signed body, headers and timeout, and get a frozen `SendResult`.

What bounds an attempt:
- one deadline for the whole attempt: DNS, connect, TLS, sending the body and reading
  the answer; a deadline that strikes while the body is read keeps the status;
- the SSRF guard: with `allow_private_networks=False` a host name is resolved, refused
  if any address is private, and connected to at exactly the addresses checked (no
  second lookup that DNS rebinding could answer differently); IP literals are checked
  when the URL is;
- at most RESPONSE_BODY_LIMIT bytes of the body and HEAD_LIMIT of status line and
  headers are read, and ANSWER_LIMIT of a whole answer (chunk framing and trailers
  included); nothing is decompressed; redirects are not followed;
- idle keep-alive connections are closed after KEEPALIVE_SECONDS. How many attempts run
  at once is the caller's to bound (the worker's ledger).

The URL's checks are targets.py's; OAuth2 bearer tokens bearer.py's and tokens.py's; a
client certificate (mutual TLS) is client_tls.py's, handed in per attempt.

With an egress proxy (proxy.py) every new connection is a CONNECT tunnel through it: the
proxy resolves the receiver's name, so the SSRF check of names is the proxy's then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Mapping

import uvloop

from core import network
from deliveries.results import ErrorKind, SendResult
from deliveries.transport import dns, http1
from deliveries.transport.bearer import exchange_with_token, token_request
from deliveries.transport.client_tls import ClientCertificate
from deliveries.transport.http1 import HEAD_LIMIT, KEEPALIVE_SECONDS, RESPONSE_BODY_LIMIT
from deliveries.transport.proxy import EgressProxy, ProxyRefused, open_tunnel
from deliveries.transport.targets import AddressBlocked, InvalidURL, Target, checked_target
from deliveries.transport.tokens import ClientCredentials, TokenFailed, Tokens

logger = logging.getLogger(__name__)

__all__ = ["HEAD_LIMIT", "KEEPALIVE_SECONDS", "RESPONSE_BODY_LIMIT", "SendResult", "Sender"]

# Headers the sender owns; a caller's copy is dropped rather than sent twice.
OWN_HEADERS = frozenset(
    {"content-type", "user-agent", "content-length", "host", "transfer-encoding", "connection"}
)
_UNSAFE_IN_HEADER = re.compile(r"[\r\n\x00]")


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
        resolve: dns.Resolve = dns.system_resolve,
        proxy: EgressProxy | None = None,
    ) -> None:
        self.user_agent = f"Homing/{version}"
        self.public_only = not allow_private_networks
        self.proxy = proxy
        # uvloop: the loop's own work per request (scheduling, transports) in C, not
        # Python (measured with aiohttp: 117-139 µs of CPU per POST against 129-147 on
        # asyncio's loop, three pairs on a loaded machine).
        self.loop = uvloop.new_event_loop()
        self._thread: threading.Thread | None = None
        self._pool = http1.Pool(self.loop)
        self._lookups = dns.Lookups(resolve=resolve)
        self._tls: ssl.SSLContext | None = None  # made at the first https URL
        self._open: set[http1.Connection] = set()  # connections in use, aborted on close
        self.tokens = Tokens(self._fetch_token)

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

    def send(
        self,
        *,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
        tenant: str | None = None,
        auth: ClientCredentials | None = None,
        client_certificate: ClientCertificate | None = None,
    ) -> SendResult:
        future = asyncio.run_coroutine_threadsafe(
            self.post(
                url=url,
                body=body,
                headers=headers,
                timeout=timeout,
                tenant=tenant,
                auth=auth,
                client_certificate=client_certificate,
            ),
            self.loop,
        )
        return future.result()

    async def post(
        self,
        *,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
        tenant: str | None = None,
        auth: ClientCredentials | None = None,
        client_certificate: ClientCertificate | None = None,
    ) -> SendResult:
        """The attempt's result; never raises (but lets cancellation through). `tenant`
        bounds the DNS threads its attempts hold (dns.py); `auth` adds an OAuth2 bearer
        token (tokens.py), fetched anew once if the receiver answers 401;
        `client_certificate` is presented in an https URL's handshake (client_tls.py)."""
        started = time.monotonic()
        deadline = self.loop.time() + timeout
        certificate = client_certificate
        try:
            if auth is None:
                status, content, retry_after = await self._exchange(
                    url, body, headers, deadline, tenant, certificate
                )
            else:
                status, content, retry_after = await exchange_with_token(
                    tokens=self.tokens,
                    auth=auth,
                    headers=headers,
                    deadline=deadline,
                    exchange=lambda signed: self._exchange(
                        url, body, signed, deadline, tenant, certificate
                    ),
                )
        except Exception as exc:  # the contract: post() never raises for an answer
            kind, error = describe_error(exc)
            return SendResult.failed(kind, error, int((time.monotonic() - started) * 1000))
        duration_ms = int((time.monotonic() - started) * 1000)
        return SendResult(status, None, content, retry_after, duration_ms)

    async def _fetch_token(self, auth: ClientCredentials, deadline: float) -> tuple[int, bytes]:
        """POST the client-credentials form to the token URL, through the same guards,
        proxy and pool as a webhook (without a client certificate)."""
        target = checked_target(auth.token_url, public_only=self.public_only)
        request = token_request(
            auth=auth,
            request_target=target.request_target,
            host=target.host_header,
            user_agent=self.user_agent,
        )
        status, content, _ = await self._send_request(target, request, deadline, None, None)
        return status, content

    async def _exchange(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        deadline: float,
        tenant: str | None,
        certificate: ClientCertificate | None,
    ) -> tuple[int, bytes, str | None]:
        target = checked_target(url, public_only=self.public_only)
        request = http1.request_bytes(
            request_target=target.request_target,
            host=target.host_header,
            headers=self._headers(headers),
            body=body,
        )
        return await self._send_request(target, request, deadline, tenant, certificate)

    async def _send_request(
        self,
        target: Target,
        request: bytes,
        deadline: float,
        tenant: str | None,
        certificate: ClientCertificate | None,
    ) -> tuple[int, bytes, str | None]:
        key = target.pool_key(certificate)
        idle = self._pool.take(key)
        if idle is not None:
            try:
                return await self._round_trip(
                    idle, key, target, request, deadline, tenant, certificate
                )
            except http1.NotSent:
                # Closed before the request went out (a receiver's keep-alive timeout):
                # nobody read it, so it is said on a new connection. A request written and
                # then closed unanswered is not: the receiver may have acted on it.
                pass
        return await self._round_trip(None, key, target, request, deadline, tenant, certificate)

    async def _round_trip(
        self,
        connection: http1.Connection | None,
        key: http1.PoolKey,
        target: Target,
        request: bytes,
        deadline: float,
        tenant: str | None,
        certificate: ClientCertificate | None,
    ) -> tuple[int, bytes, str | None]:
        """One request on `connection` (a new one if None): the answer's status, body and
        Retry-After; the connection goes back to the pool if it can carry another."""
        try:
            async with asyncio.timeout_at(deadline):
                if connection is None:
                    connection = await self._connect(target, tenant, certificate)
                self._open.add(connection)
                answer = await connection.send(request)
            try:
                async with asyncio.timeout_at(deadline):
                    await connection.body()
            except TimeoutError:
                pass  # the receiver answered; its body was cut short
        except BaseException:
            if connection is not None:
                connection.abort()
            raise
        finally:
            if connection is not None:
                self._open.discard(connection)
        self._pool.put(key, connection)  # or closed, if it cannot carry another
        return answer.status, bytes(answer.body), answer.retry_after

    async def _connect(
        self, target: Target, tenant: str | None, certificate: ClientCertificate | None
    ) -> http1.Connection:
        """A new connection to one of the target's addresses, tried in resolver order, or
        a tunnel to the target through the egress proxy."""
        tls = self._tls_context(certificate) if target.scheme == "https" else None
        if self.proxy is not None:
            return await self._connect_through_proxy(self.proxy, target, tls)
        if target.is_ip_literal:
            addresses = [target.host]
        else:
            addresses = await self._lookups.addresses(target.host, target.port, tenant=tenant)
            if self.public_only and (reason := network.blocked_reason(target.host, addresses)):
                raise AddressBlocked(reason)
        failure: OSError | None = None
        for address in addresses:
            try:
                _, connection = await self.loop.create_connection(
                    lambda: http1.Connection(self.loop),
                    address,
                    target.port,
                    ssl=tls,
                    server_hostname=target.host if tls else None,
                )
            except ssl.SSLError:
                raise  # the address answered: its TLS is the problem, not the route
            except OSError as exc:
                failure = exc
                continue
            return connection
        raise failure or OSError(f"cannot resolve {target.host}: no address")

    async def _connect_through_proxy(
        self, proxy: EgressProxy, target: Target, tls: ssl.SSLContext | None
    ) -> http1.Connection:
        # The proxy's own name is the operator's, resolved without the SSRF guard (it is
        # usually a private address); untenanted, as it is one name for every tenant.
        addresses = await self._lookups.addresses(proxy.host, proxy.port)
        sock = await open_tunnel(self.loop, proxy, addresses, target.host, target.port)
        try:
            _, connection = await self.loop.create_connection(
                lambda: http1.Connection(self.loop),
                sock=sock,
                ssl=tls,
                server_hostname=target.host if tls else None,
            )
        except BaseException:
            sock.close()
            raise
        return connection

    def _tls_context(self, certificate: ClientCertificate | None) -> ssl.SSLContext:
        if certificate is not None:
            return certificate.context  # verifies the receiver the same way, and presents it
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _headers(self, headers: Mapping[str, str]) -> list[tuple[str, str]]:
        merged = [(k, v) for k, v in headers.items() if k.lower() not in OWN_HEADERS]
        for name, value in merged:
            if _UNSAFE_IN_HEADER.search(name) or _UNSAFE_IN_HEADER.search(value):
                raise ValueError(f"the header {name[:100]!r} contains CR, LF or NUL")
        merged.append(("Content-Type", "application/json"))
        merged.append(("User-Agent", self.user_agent))
        return merged

    def close(self, timeout: float = 5.0) -> None:
        """Close every connection and stop the loop thread, waiting `timeout` seconds at
        most (a stuck loop is left to the process's exit)."""
        if self.loop.is_closed():
            return
        thread = self._thread
        if thread is not None and thread.is_alive():
            closing = asyncio.run_coroutine_threadsafe(self._close_connections(), self.loop)
            with contextlib.suppress(Exception):  # TimeoutError: the loop is stuck
                closing.result(timeout=timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            thread.join(timeout=timeout)
            if thread.is_alive():
                logger.warning("the sender's event loop did not stop within %s s", timeout)
                return
        self._lookups.close()
        self.loop.close()

    async def _close_connections(self) -> None:
        self._pool.close()
        for connection in list(self._open):
            connection.abort()
        # Let the exchanges under way see their connection end and return their result
        # before the loop stops (a stopped loop would leave their callers waiting).
        for _ in range(100):
            if not self._open:
                return
            await asyncio.sleep(0.01)


def describe_error(exc: BaseException) -> tuple[ErrorKind, str]:
    """The error kind retry.classify reads, and the text stored on the attempt."""
    if isinstance(exc, AddressBlocked):
        return ErrorKind.BLOCKED, str(exc)
    if isinstance(exc, TokenFailed):
        return ErrorKind.TOKEN, str(exc)
    if isinstance(exc, ProxyRefused):
        # Retryable either way; only a target the proxy could not reach counts against
        # the endpoint's circuit (CONNECTION), a refusal is the proxy's (PROXY).
        return (ErrorKind.CONNECTION if exc.target_failed else ErrorKind.PROXY), str(exc)
    if isinstance(exc, InvalidURL):
        return ErrorKind.INVALID_URL, f"invalid URL: {exc}"
    if isinstance(exc, TimeoutError):  # before OSError, whose subclass it is
        return ErrorKind.TIMEOUT, "timeout"
    if isinstance(exc, ssl.SSLError):
        return ErrorKind.TLS, f"TLS error: {exc}"
    if isinstance(exc, (OSError, UnicodeError)):
        return ErrorKind.CONNECTION, f"connection error: {_os_error_text(exc)}"
    return ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def _os_error_text(exc: OSError | UnicodeError) -> str:
    # "[Errno 111] Connect call failed ('1.2.3.4', 80)" says less than "Connection refused"
    errno = getattr(exc, "errno", None)
    if errno is not None and not isinstance(exc, socket.gaierror):
        return os.strerror(errno)
    return str(exc) or type(exc).__name__
