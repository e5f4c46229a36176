"""core/tracing.py: when tracing is on, and which trace context an event keeps."""

from __future__ import annotations

import pytest

from core import tracing

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "homing", "OTEL_TRACES_SAMPLER": "always_on"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_tracing_is_on_only_with_an_exporter_endpoint(environ, wanted) -> None:
    assert tracing.tracing_wanted(environ) is wanted


def test_without_the_variables_no_tracer_is_built(monkeypatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    tracing.tracing_start(service="homing-test")
    assert tracing.tracer is None


def test_a_valid_traceparent_is_kept_with_its_tracestate() -> None:
    assert tracing.trace_context_of(PARENT) == PARENT
    assert tracing.trace_context_of(PARENT.upper(), " shop=1,vendor=x ") == (
        f"{PARENT}\nshop=1,vendor=x"
    )
    assert tracing.trace_headers(tracing.trace_context_of(PARENT, "shop=1")) == {
        "traceparent": PARENT,
        "tracestate": "shop=1",
    }
    assert tracing.trace_headers(None) == {}


@pytest.mark.parametrize(
    "traceparent",
    [
        "",
        "garbage",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # no trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # no span id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff
        f"{PARENT}-extra",  # version 00 has exactly four fields
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",  # short span id
    ],
)
def test_an_invalid_traceparent_is_not_kept(traceparent) -> None:
    assert tracing.trace_context_of(traceparent, "shop=1") is None


def test_a_later_version_is_read_by_its_first_four_fields() -> None:
    later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more"
    assert tracing.trace_context_of(later) == later[:55]


def test_a_tracestate_out_of_bounds_is_dropped_whole() -> None:
    assert tracing.trace_context_of(PARENT, "a=" + "x" * 600) == PARENT
    assert tracing.trace_context_of(PARENT, "a=1\nb=2") == PARENT
