"""homing_receiver's trace helpers: a handler continues the trace of the webhook's attempt."""

from __future__ import annotations

from homing_receiver import parent_context, trace_headers

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_trace_headers_are_found_whatever_their_case_or_wsgi_spelling() -> None:
    assert trace_headers({"Traceparent": PARENT, "TraceState": "shop=1", "X": "y"}) == {
        "traceparent": PARENT,
        "tracestate": "shop=1",
    }
    assert trace_headers({"HTTP_TRACEPARENT": PARENT}) == {"traceparent": PARENT}
    assert trace_headers({"content-type": "application/json"}) == {}


def test_a_handlers_span_is_a_child_of_the_webhooks_attempt() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("receiver")
    with tracer.start_as_current_span(
        "handle", context=parent_context({"traceparent": PARENT})
    ) as span:
        context = span.get_span_context()
        parent = span.parent  # type: ignore[attr-defined]  # the SDK span has it, the API type not
    assert f"{context.trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert parent is not None and f"{parent.span_id:016x}" == "00f067aa0ba902b7"
