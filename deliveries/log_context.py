"""The ids a log line about a delivery carries (config/logs.py puts them in JSON lines)."""

from __future__ import annotations

from typing import Any


def delivery_log_context(delivery: Any) -> dict[str, str]:
    """The `extra=` of a log line about a delivery."""
    return {
        "tenant_id": delivery.tenant_id,
        "event_id": delivery.event_id,
        "delivery_id": delivery.id,
        "endpoint_id": delivery.endpoint_id,
    }
