"""OpenTelemetry traces: off, and free, unless an OTLP exporter endpoint is configured.

Configured by OpenTelemetry's standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, …),
which the SDK reads itself. `tracing_start()`, called once by each process's owner (the
web application, the worker command, the scheduler command), builds the tracer provider
when they ask for it; until then, and always without them, `tracer` is None and the hot
paths test only that: no tracer is built, no span object is made, nothing is imported from
the SDK (DESIGN.md 26).

Spans leave through a BatchSpanProcessor: a bounded queue that drops spans when full and
a thread of its own that exports, so an exporter that is slow or down never holds up an
ingest or an attempt.

The trace context that travels with an event is the W3C `traceparent` (and `tracestate`)
a producer sent, kept as one text value (`trace_context`: the two headers joined by a
newline, which neither may contain), so that an attempt hours later is still a child of it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

logger = logging.getLogger(__name__)

# W3C Trace Context level 1: version 00 exactly; a later version is read by its first
# four fields (the spec says so) and sent on as version 00 by the span that continues it.
TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
# The spec asks to pass on at least 512 characters of tracestate; more is dropped whole
# (cutting list members apart would corrupt them).
TRACESTATE_MAX = 512
TRACESTATE_CHARACTERS = re.compile(r"^[\x20-\x7e]*$")

tracer: Tracer | None = None  # set by tracing_start() when tracing is configured
_provider: TracerProvider | None = None


def tracing_wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, the `otlp` exporter
    (the default) and the SDK not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "otlp":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )


def tracing_start(*, service: str) -> None:
    """Build the tracer provider and its exporter, if the environment asks for traces
    (once per process; a second call changes nothing). `service` names the process
    (`homing-web`, …) unless OTEL_SERVICE_NAME does."""
    global tracer, _provider
    if tracer is not None or not tracing_wanted(os.environ):
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service}
    provider = TracerProvider(resource=Resource.create(attributes))  # the sampler: OTEL_*
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _provider = provider
    tracer = provider.get_tracer("homing")
    logger.info("tracing on: spans are exported over OTLP/HTTP")


def tracing_close(timeout_ms: int = 5000) -> None:
    """Export what is queued (within `timeout_ms`) and stop the exporter's thread."""
    global tracer, _provider
    provider, _provider, tracer = _provider, None, None
    if provider is not None:
        provider.force_flush(timeout_ms)
        provider.shutdown()


def trace_context_of(traceparent: str | None, tracestate: str | None = None) -> str | None:
    """The value kept with an event for the headers a producer sent: None when there is
    no valid `traceparent` (an invalid one is ignored, as the W3C spec says: the trace
    starts afresh); `tracestate` only with it, and only if it is within bounds."""
    if not traceparent:
        return None
    traceparent = traceparent.strip().lower()
    found = TRACEPARENT.match(traceparent)
    if found is None:
        return None
    version, trace_id, span_id, _flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"}:
        return None
    if set(span_id) == {"0"}:
        return None
    if version != "00":
        traceparent = traceparent[:55]
    state = (tracestate or "").strip()
    if state and len(state) <= TRACESTATE_MAX and TRACESTATE_CHARACTERS.match(state):
        return f"{traceparent}\n{state}"
    return traceparent


def trace_headers(trace_context: str | None) -> dict[str, str]:
    """The `traceparent`/`tracestate` headers of a kept trace context."""
    if not trace_context:
        return {}
    traceparent, _, tracestate = trace_context.partition("\n")
    return (
        {"traceparent": traceparent, "tracestate": tracestate}
        if tracestate
        else {"traceparent": traceparent}
    )


def parent_of(trace_context: str | None) -> Context | None:
    """The OpenTelemetry context whose remote span is the kept one (None: a new trace).

    Read by position, not by the propagator's parser: a kept value was validated and
    normalised by trace_context_of when it was stored, and this runs once per attempt."""
    if not trace_context:
        return None
    from opentelemetry.trace import (
        NonRecordingSpan,
        SpanContext,
        TraceFlags,
        TraceState,
        set_span_in_context,
    )

    traceparent, _, tracestate = trace_context.partition("\n")
    parent = SpanContext(
        trace_id=int(traceparent[3:35], 16),
        span_id=int(traceparent[36:52], 16),
        is_remote=True,
        trace_flags=TraceFlags(int(traceparent[53:55], 16)),
        trace_state=TraceState.from_header([tracestate]) if tracestate else None,
    )
    return set_span_in_context(NonRecordingSpan(parent))


def span_trace_context(span: Span) -> str | None:
    """The trace context of `span` as kept with an event (its traceparent and tracestate)."""
    headers = span_headers(span)
    if not headers:
        return None
    state = headers.get("tracestate")
    return f"{headers['traceparent']}\n{state}" if state else headers["traceparent"]


def span_headers(span: Span) -> dict[str, str]:
    """The W3C `traceparent` (and `tracestate`) of `span`: what a webhook carries. Built
    from the span's own ids, which are valid by construction (no parsing per attempt)."""
    context = span.get_span_context()
    if not context.is_valid:
        return {}
    headers = {
        "traceparent": (
            f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
        )
    }
    state = context.trace_state.to_header() if context.trace_state else ""
    if state and len(state) <= TRACESTATE_MAX and TRACESTATE_CHARACTERS.match(state):
        headers["tracestate"] = state
    return headers


def span_failed(span: Span, description: str) -> None:
    """Mark `span` as failed (an error status) with why."""
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, description))


def attributes_of(**values: Any) -> dict[str, Any]:
    """Span attributes without the None values OpenTelemetry refuses."""
    return {f"homing.{k}": v for k, v in values.items() if v is not None}
