"""What an endpoint may be: the one set of rules for the API, the admin, commands and UI.

Each check raises `InvalidInput` naming the field, which the API renders as a 400 and the
admin form shows next to the field. A value that passes here must be sendable: a bad port
or a header `http.client` refuses would otherwise burn every retry over 35 hours.
"""

from __future__ import annotations

import concurrent.futures
import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from core.exceptions import InvalidInput
from core.network import a_label, resolve_blocked_reason
from webhooks.filters import filter_check
from webhooks.scope import Scope
from webhooks.secrets import SIGNING_SCHEMES

MAX_URL_LENGTH = 2048
MAX_CUSTOM_HEADERS = 20
MAX_HEADER_VALUE = 4096
MAX_EVENT_TYPES = 100
MAX_RATE_LIMIT = 10_000
# Endpoint saves resolve the host in a web thread: a stalled resolver must not hold it.
DNS_TIMEOUT_SECONDS = 2.0

# RFC 9110 token characters. Checked with fullmatch: `^...$` lets a trailing "\n" through.
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]{1,100}")
EVENT_TYPE_PATTERN = re.compile(r"\*|[A-Za-z0-9_\-:/]+(\.[A-Za-z0-9_\-:/]+)*(\.\*)?")
# Headers Homing sets itself (and every `webhook-` and `homing-` one): a user value would
# break signing, sequencing or HTTP framing.
RESERVED_HEADERS = {
    "content-type",
    "user-agent",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
}
# Control characters (tab is allowed in a field value by RFC 9110).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")

_resolver = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="dns-check")


def endpoint_url_check(*, url: Any) -> str:
    if not isinstance(url, str) or not url:
        raise InvalidInput("url", "Must be a URL.")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidInput("url", f"At most {MAX_URL_LENGTH} characters.")
    if CONTROL_CHARACTERS.search(url) or any(c.isspace() for c in url):
        raise InvalidInput("url", "Contains whitespace or control characters.")
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. "http://[::1" (an unclosed IPv6 bracket)
        raise InvalidInput("url", "Not a valid URL.") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidInput("url", "Only http and https URLs are accepted.")
    if not parts.hostname:
        raise InvalidInput("url", "The URL has no host.")
    if "@" in parts.netloc:
        raise InvalidInput("url", "Put credentials in `headers`, not in the URL.")
    try:
        port = parts.port  # raises ValueError for a port out of 0-65535 or not a number
    except ValueError:
        raise InvalidInput("url", "The port must be a number from 1 to 65535.") from None
    if port == 0:
        raise InvalidInput("url", "The port must be a number from 1 to 65535.")
    try:
        host = a_label(parts.hostname)
    except UnicodeError:
        raise InvalidInput(
            "url", "The host is not a valid internationalised name (UTS #46 / IDNA 2008)."
        ) from None
    if host != parts.hostname:  # stored and shown as the A-label the sender uses
        url = _with_host(url, netloc=parts.netloc, host=host)
    if not settings.HOMING_ALLOW_PRIVATE_NETWORKS:
        reason = _blocked_reason_within_timeout(host, port)
        if reason:
            raise InvalidInput(
                "url",
                f"{reason}; private, loopback and link-local addresses are refused "
                "(set HOMING_ALLOW_PRIVATE_NETWORKS=true to allow them).",
            )
    return url


def _with_host(url: str, *, netloc: str, host: str) -> str:
    """`url` with its host replaced; the rest (port, path, query) kept byte for byte.
    Only for a non-ASCII host, which has no brackets and no user info (refused above)."""
    start = url.index("//") + 2
    port = netloc[len(netloc.rpartition(":")[0]) :] if ":" in netloc else ""
    return url[:start] + host + port + url[start + len(netloc) :]


def _blocked_reason_within_timeout(host: str, port: int | None) -> str | None:
    """The SSRF check with a deadline. A resolver that does not answer in time is not a
    refusal: the sender checks every address again when it connects (DNS rebinding makes
    that the check that matters), so saving stays fast and still safe."""
    future = _resolver.submit(resolve_blocked_reason, host, port)
    try:
        return future.result(timeout=DNS_TIMEOUT_SECONDS)
    except concurrent.futures.TimeoutError:
        return None


def endpoint_headers_check(*, headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise InvalidInput("headers", "Must be an object of header names to values.")
    if len(headers) > MAX_CUSTOM_HEADERS:
        raise InvalidInput("headers", f"At most {MAX_CUSTOM_HEADERS} headers.")
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            raise InvalidInput("headers", f"{name!r} is not a valid header name.")
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith(("webhook-", "homing-")):
            raise InvalidInput("headers", f"{name!r} is set by Homing and cannot be overridden.")
        if not isinstance(value, str):
            raise InvalidInput("headers", f"The value of {name!r} must be a string.")
        if len(value) > MAX_HEADER_VALUE:
            raise InvalidInput(
                "headers", f"The value of {name!r} is longer than {MAX_HEADER_VALUE}."
            )
        if CONTROL_CHARACTERS.search(value):
            raise InvalidInput("headers", f"The value of {name!r} contains a control character.")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidInput(
                "headers", f"The value of {name!r} has characters outside Latin-1."
            ) from None
    return dict(headers)


def endpoint_event_types_check(*, event_types: Any) -> list[str]:
    if event_types is None:
        return []
    if not isinstance(event_types, list):
        raise InvalidInput("event_types", "Must be a list of event types or `prefix.*` patterns.")
    if len(event_types) > MAX_EVENT_TYPES:
        raise InvalidInput("event_types", f"At most {MAX_EVENT_TYPES} items.")
    for pattern in event_types:
        if (
            not isinstance(pattern, str)
            or len(pattern) > 255
            or not EVENT_TYPE_PATTERN.fullmatch(pattern)
        ):
            raise InvalidInput(
                "event_types", f"{pattern!r} is not an event type or a `prefix.*` pattern."
            )
    return list(dict.fromkeys(event_types))  # drop repeats, keep order


def endpoint_rate_limit_check(*, rate_limit: Any) -> int | None:
    if rate_limit is None:
        return None
    if isinstance(rate_limit, bool) or not isinstance(rate_limit, int):
        raise InvalidInput("rate_limit", "Must be a whole number or null.")
    if not 1 <= rate_limit <= MAX_RATE_LIMIT:
        raise InvalidInput("rate_limit", f"Must be from 1 to {MAX_RATE_LIMIT} (or null).")
    return rate_limit


MAX_OWNER_LENGTH = 255


def endpoint_owner_check(*, owner: Any) -> str | None:
    """null, or 1-255 printable characters: the tenant's own name for its customer."""
    if owner is None:
        return None
    if not isinstance(owner, str) or not 1 <= len(owner) <= MAX_OWNER_LENGTH:
        raise InvalidInput("owner", f"Must be null or 1 to {MAX_OWNER_LENGTH} characters.")
    if not owner.isprintable():
        raise InvalidInput("owner", "Must be printable characters only.")
    return owner


def endpoint_fields_for_scope(*, scope: Scope, fields: dict[str, Any]) -> dict[str, Any]:
    """What a consumer (one owner) may set: its endpoints stay its owner's (forced on
    create, not handed to anyone else on update), and they never subscribe to Homing's
    operational events, which are about every endpoint of the tenant (other owners' URLs
    and failures). The tenant's own key may set anything."""
    if not scope.is_consumer:
        return fields
    if fields.get("owner", scope.owner) != scope.owner:
        raise InvalidInput("owner", "A consumer key cannot change an endpoint's owner.")
    for pattern in fields.get("event_types") or []:
        if isinstance(pattern, str) and pattern.startswith("homing."):
            raise InvalidInput(
                "event_types",
                f"{pattern!r}: operational events (homing.*) are about all of the tenant's "
                "endpoints; only the tenant's own key can subscribe to them.",
            )
    return {**fields, "owner": scope.owner}


def endpoint_signing_check(*, signing: Any) -> str:
    if signing not in SIGNING_SCHEMES:
        raise InvalidInput("signing", f"One of {', '.join(SIGNING_SCHEMES)}.")
    return str(signing)


def endpoint_filter_check(*, filter: Any) -> dict[str, Any] | None:
    """null, or a filter (webhooks/filters.py) that compiles: a 400 names its path."""
    return filter_check(filter)


CHECKS = {
    "signing": lambda value: endpoint_signing_check(signing=value),
    "filter": lambda value: endpoint_filter_check(filter=value),
    "owner": lambda value: endpoint_owner_check(owner=value),
    "url": lambda value: endpoint_url_check(url=value),
    "headers": lambda value: endpoint_headers_check(headers=value),
    "event_types": lambda value: endpoint_event_types_check(event_types=value),
    "rate_limit": lambda value: endpoint_rate_limit_check(rate_limit=value),
}


def endpoint_fields_check(*, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields with each checked value normalised; raises InvalidInput on the first bad one."""
    return {
        name: CHECKS[name](value) if name in CHECKS else value for name, value in fields.items()
    }
