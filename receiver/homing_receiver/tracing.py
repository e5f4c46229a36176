"""The trace a webhook belongs to: Homing sends each webhook with the W3C `traceparent`
(and `tracestate`) of its attempt's span, so a handler can continue the producer's trace.

`trace_headers(headers)` needs only the standard library; `parent_context(headers)` is the
OpenTelemetry context to start the handler's span in (the `[otel]` extra), e.g.
``tracer.start_as_current_span("handle order.paid", context=parent_context(headers))``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TRACE_HEADERS = ("traceparent", "tracestate")


def trace_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The webhook's `traceparent`/`tracestate`, looked up case-insensitively."""
    found = {}
    for name, value in headers.items():
        lowered = name.lower().replace("_", "-").removeprefix("http-")
        if lowered in TRACE_HEADERS:
            found[lowered] = value
    return found


def parent_context(headers: Mapping[str, str]) -> Any:
    """The OpenTelemetry Context whose parent span is the webhook's attempt (a fresh
    context when the webhook carried none). Needs `opentelemetry-api` (`[otel]`)."""
    from opentelemetry.propagate import extract

    return extract(trace_headers(headers))
