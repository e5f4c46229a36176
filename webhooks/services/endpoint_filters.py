"""An endpoint's filter, stored encrypted like its other secrets (CONTRACT section 2: the
endpoint fields added this round are all encrypted at rest).

A filter says what a customer's business looks like (amounts, countries, customer ids),
so the column holds a Fernet token (core.crypto) of its compact JSON, "" for none. The
API, the console and the portal show it back in plain (it is not write-only); routing
opens each token once, when it compiles the filter (deliveries/intake/routing.py).
"""

from __future__ import annotations

import json
from typing import Any

from core import crypto
from core.crypto import UNREADABLE, opened
from core.exceptions import StoredValueUnreadable
from webhooks.models import Endpoint


def filter_sealed(spec: dict[str, Any] | None) -> str:
    """What the column stores for a checked filter (webhooks.filters.filter_check)."""
    if spec is None:
        return ""
    return crypto.encrypt(json.dumps(spec, ensure_ascii=False, separators=(",", ":")))


def filter_opened(stored: str) -> dict[str, Any] | None:
    """The filter a stored value holds (None: no filter); DecryptionFailed when no
    configured key opens it."""
    if not stored:
        return None
    value: dict[str, Any] = json.loads(crypto.decrypt(stored))
    return value


def endpoint_filter(*, endpoint: Endpoint) -> dict[str, Any] | None:
    return filter_opened(endpoint.filter)


def endpoint_filter_text(*, endpoint: Endpoint) -> str | None:
    """The filter as the console's and the portal's pages show it: indented JSON, "" for
    none, None when no configured key opens it (HOMING_ENCRYPTION_KEY changed without a
    rotation). Routing lets such a filter match nothing (deliveries/intake/routing.py);
    the pages say it cannot be read and let it be replaced, rather than answer 500."""
    spec = opened(lambda: endpoint_filter(endpoint=endpoint))
    if spec is UNREADABLE:
        return None
    return "" if spec is None else json.dumps(spec, indent=2, ensure_ascii=False)


def endpoint_filter_readable(*, endpoint: Endpoint) -> dict[str, Any] | None:
    """The endpoint's filter, asked for on purpose (trying it): a 409 naming it when no
    configured key opens it, for the caller to replace it."""
    spec = opened(lambda: endpoint_filter(endpoint=endpoint))
    if spec is UNREADABLE:
        raise StoredValueUnreadable(
            "filter", "Replace it (PATCH the endpoint's `filter`), or give `filter` to try one."
        )
    return spec
