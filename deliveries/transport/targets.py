"""Where a webhook goes: an endpoint URL checked once (scheme, host as an A-label, port,
the request target percent-encoded) and the SSRF guard's check of IP literals; host
names are checked on every new connection (sender.py), against DNS rebinding.

Pure: no Django. Cached per URL and setting, as an endpoint's URL is checked once, not
per attempt.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from typing import TypeGuard
from urllib.parse import quote, urlsplit

from core import network
from deliveries.transport import http1
from deliveries.transport.client_tls import ClientCertificate


class AddressBlocked(Exception):
    """The SSRF guard refused the host; its message is the stored error."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL's POST goes: checked once per URL, then cached."""

    scheme: str
    host: str  # as resolved and checked: IDNA-encoded, no brackets
    port: int
    request_target: str  # path and query, percent-encoded
    host_header: str
    is_ip_literal: bool

    def pool_key(self, certificate: ClientCertificate | None) -> http1.PoolKey:
        """Connections are shared by target and by the client certificate they presented."""
        fingerprint = certificate.fingerprint if certificate is not None else ""
        return (self.scheme, self.host, self.port, fingerprint)


class InvalidURL(Exception):
    pass


@functools.lru_cache(maxsize=4096)  # an endpoint's URL is checked once, not per attempt
def checked_target(url: str, *, public_only: bool) -> Target:
    """Where to POST; raises InvalidURL, or AddressBlocked for an IP literal the SSRF
    guard refuses (host names are checked on every new connection)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # an out-of-range port raises here
        host = network.a_label(parts.hostname or "")
    except (ValueError, UnicodeError) as exc:
        raise InvalidURL(str(exc) or "not a URL") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not _valid_host(host) or "@" in parts.netloc:
        raise InvalidURL(f"not an http(s) URL: {url[:200]}")
    is_ip_literal = _is_ip_literal(host)
    if public_only and is_ip_literal:
        reason = network.blocked_reason(host, [host])
        if reason:
            raise AddressBlocked(reason)
    default_port = 443 if scheme == "https" else 80
    port = port or default_port
    named = f"[{host}]" if ":" in host else host
    request_target = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        request_target += "?" + quote(parts.query, safe=_QUERY_SAFE)
    return Target(
        scheme=scheme,
        host=host,
        port=port,
        request_target=request_target,
        host_header=named if port == default_port else f"{named}:{port}",
        is_ip_literal=is_ip_literal,
    )


# Characters left as they are in a path or query; anything else (spaces, non-ASCII) is
# percent-encoded as UTF-8, and existing %XX escapes are kept.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


def _valid_host(host: str | None) -> TypeGuard[str]:
    return bool(host) and not any(c.isspace() or ord(c) < 32 for c in host or "")


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
