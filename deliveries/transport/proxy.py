"""The egress proxy (HOMING_EGRESS_PROXY): every connection is a `CONNECT host:port` tunnel.

Why CONNECT for plain http too: an absolute-form request would hand the proxy the body
and headers (signatures, bearer tokens); a tunnel gives it only the target's name and
port, and TLS stays end to end with the receiver (SNI and the host-name check are the
sender's, on the URL's host). The proxy resolves the target's name, so it is the SSRF
enforcement point then (docs/deploy.md): the sender still refuses IP literals in
private ranges, but names are the proxy's to check.

Pure (no Django), like the rest of the transport: the caller parses the setting with
`parse_proxy` and hands the result to the Sender.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import socket
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from deliveries.transport.http1 import HEAD_LIMIT

# A 5xx answer to CONNECT is the proxy saying the target failed (squid and Smokescreen
# answer 502/503/504 when they cannot resolve or reach it, tinyproxy 500 "Unable to
# connect"): it counts against the endpoint's circuit. A 4xx (403 by a deny rule, 407) is
# the proxy's own refusal and does not.
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: ([^\r\n]*))?")


@dataclass(frozen=True, slots=True)
class EgressProxy:
    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization value, from the URL's user info

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"


class ProxyRefused(ConnectionError):
    """The proxy answered CONNECT with something other than 2xx."""

    def __init__(self, status: int, reason: str, target: str) -> None:
        super().__init__(f"the proxy refused CONNECT {target}: HTTP {status} {reason}".rstrip())
        self.status = status

    @property
    def target_failed(self) -> bool:
        return 500 <= self.status <= 599


def parse_proxy(url: str) -> EgressProxy:
    """`http://[user:password@]host:port`; ValueError naming what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError("HOMING_EGRESS_PROXY must be an http:// URL (http://host:port)")
    if not parts.hostname or parts.port is None:
        raise ValueError("HOMING_EGRESS_PROXY needs a host and a port (http://host:port)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("HOMING_EGRESS_PROXY is host and port only, no path")
    authorization = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode("ascii")
    return EgressProxy(parts.hostname, parts.port, authorization)


def connect_request(proxy: EgressProxy, host: str, port: int) -> bytes:
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


async def open_tunnel(
    loop: asyncio.AbstractEventLoop, proxy: EgressProxy, addresses: list[str], host: str, port: int
) -> socket.socket:
    """A socket connected to the proxy with its CONNECT to host:port accepted, ready for
    TLS or HTTP. Raises ProxyRefused, or OSError when the proxy cannot be reached. The
    caller bounds it with its deadline (the socket is closed if it is cancelled)."""
    failure: OSError | None = None
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, (address, proxy.port))
        except OSError as exc:
            sock.close()
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            failure = ConnectionError(f"cannot reach the proxy {proxy.name}: {reason}")
            continue
        except BaseException:
            sock.close()
            raise
        try:
            await _connect_through(loop, sock, proxy, host, port)
        except BaseException:
            sock.close()
            raise
        return sock
    raise failure or OSError(f"cannot resolve the proxy {proxy.name}")


async def _connect_through(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, proxy: EgressProxy, host: str, port: int
) -> None:
    await loop.sock_sendall(sock, connect_request(proxy, host, port))
    head = b""
    while (end := head.find(b"\r\n\r\n")) == -1:
        if len(head) >= HEAD_LIMIT:
            raise ConnectionError(f"the proxy's answer to CONNECT exceeds {HEAD_LIMIT} bytes")
        chunk = await loop.sock_recv(sock, 4096)
        if not chunk:
            raise ConnectionError(f"the proxy {proxy.name} closed the connection during CONNECT")
        head += chunk
    target = f"{host}:{port}"
    match = _STATUS_LINE.match(head)
    if match is None:
        raise ConnectionError(f"the proxy's answer to CONNECT {target} is not HTTP")
    status = int(match.group(1))
    if not 200 <= status < 300:
        reason = (match.group(2) or b"").decode("latin-1")[:100]
        raise ProxyRefused(status, reason, target)
    if end + 4 < len(head):
        # The tunnel's first bytes belong to TLS or HTTP, and neither receiver speaks
        # first: bytes already there are the proxy's, and would poison the exchange.
        raise ConnectionError("the proxy sent bytes after accepting CONNECT")
