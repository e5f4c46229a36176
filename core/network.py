"""Which addresses Homing may send webhooks to (the SSRF guard), and the host name it
looks up for a URL.

Used twice: by the API when an endpoint URL is saved, and by the sender on every new
connection — the second check is the one that matters, because a DNS record can change
after the URL was accepted (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

import idna

# Well-known NAT64 prefix: 64:ff9b::a.b.c.d is translated to the IPv4 address a.b.c.d.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def is_public_address(ip: str) -> bool:
    """True for a globally routable unicast address; False for anything else or garbage."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        # ::ffff:10.0.0.1, 2002:7f00:1:: (6to4) and 64:ff9b::7f00:1 (NAT64) reach the
        # IPv4 address inside them.
        embedded = address.ipv4_mapped or address.sixtofour
        if address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public_address(str(embedded))
        if address.is_site_local:  # deprecated fec0::/10, still routed privately
            return False
    # is_global alone lets through multicast (224/4, ff0e::/16), hence the rest.
    return address.is_global and not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def a_label(host: str) -> str:
    """The ASCII name of `host`: an internationalised name converted by UTS #46 / IDNA
    2008 (CONTRACT section 2), so `straße.de` is `xn--strae-oqa.de`. Python's own "idna"
    codec is IDNA 2003, which maps it to `strasse.de`: someone else's host.

    ASCII labels are kept as they are (`_dmarc`-style underscores included). Raises
    UnicodeError (idna.IDNAError) for a name IDNA 2008 refuses (`☃.de`).
    """
    if host.isascii():
        return host
    mapped = idna.uts46_remap(host, std3_rules=False, transitional=False)
    return ".".join(
        label if label.isascii() else idna.alabel(label).decode("ascii")
        for label in mapped.split(".")
    )


def resolve_addresses(host: str, port: int | None = None) -> list[str]:
    """Every address `host` resolves to, in resolver order, without duplicates.

    Raises socket.gaierror (or UnicodeError for an unencodable name) like getaddrinfo.
    """
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def blocked_reason(host: str, addresses: Iterable[str]) -> str | None:
    # One private record blocks the host: we cannot tell which one a connection uses.
    if any(not is_public_address(address) for address in addresses):
        return f"blocked: {host} resolves to a private address"
    return None


def resolve_blocked_reason(host: str, port: int | None = None) -> str | None:
    """Why Homing must not connect to `host`, or None when it may.

    A name that does not resolve is not blocked: sending to it fails as a connection
    error, which is the truthful message.
    """
    try:
        addresses = resolve_addresses(host, port)
    except (OSError, UnicodeError):
        return None
    return blocked_reason(host, addresses)
