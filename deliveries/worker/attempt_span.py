"""An attempt's span (only while tracing is on, core/tracing.py): a child of the trace
context its event came with, however much later the attempt, and the `traceparent` the
webhook carries so that the receiver continues the trace from it."""

from __future__ import annotations

from opentelemetry.trace import Span, SpanKind, Tracer

from core import tracing
from deliveries.lifecycle.in_hand import InHand
from deliveries.lifecycle.retry import Outcome, classify
from deliveries.results import SendResult


def attempt_span_start(tracer: Tracer, delivery: InHand) -> Span:
    event = delivery.event
    return tracer.start_span(
        "webhook attempt",
        context=tracing.parent_of(event.trace_context),
        kind=SpanKind.CLIENT,
        # None of them is ever None (attributes_of's filter is not needed per attempt).
        attributes={
            "homing.tenant_id": delivery.tenant_id,
            "homing.endpoint_id": delivery.endpoint_id,
            "homing.event_id": event.id,
            "homing.event_type": event.type,
            "homing.delivery_id": delivery.id,
            "homing.attempt": delivery.attempt_count,
        },
    )


def attempt_span_headers(span: Span) -> dict[str, str]:
    """The W3C headers of the attempt's span, for the webhook."""
    return tracing.span_headers(span)


def attempt_span_end(span: Span, result: SendResult | None) -> None:
    """Status code, outcome and duration; an error status when the attempt failed."""
    if not span.is_recording():  # sampled out: nothing to classify, nothing is exported
        span.end()
        return
    if result is None:  # the endpoint was deactivated since the claim: nothing was sent
        span.set_attribute("homing.outcome", "not_sent")
        span.end()
        return
    verdict = classify(
        status_code=result.status_code, error_kind=result.error_kind, error=result.error or ""
    )
    if result.status_code is not None:
        span.set_attribute("http.response.status_code", result.status_code)
    span.set_attribute("homing.outcome", verdict.outcome.value)
    span.set_attribute("homing.duration_ms", result.duration_ms)
    if verdict.outcome is not Outcome.SUCCESS:
        tracing.span_failed(span, verdict.reason or result.error or "failed")
    span.end()
