"""One event end to end in OpenTelemetry: the producer's trace id on the ingest span, on
every attempt's span (retries seconds apart, each from a claim of its own) and in the
`traceparent` the receiver got; real web and worker processes exporting over OTLP/HTTP to
a real local receiver, whose requests are decoded with `opentelemetry-proto`."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import Counter

import pytest
from django.conf import settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from deliveries.models import Attempt, Delivery
from tests.processes import Web, process_env, wait_until
from tests.receivers import Answer, Receiver

pytestmark = pytest.mark.e2e

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PRODUCER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PRODUCER_SPAN}-01"


def _spans(otlp: Receiver) -> list:
    spans = []
    for request in list(otlp.requests):
        assert request.path == "/v1/traces"
        export = ExportTraceServiceRequest.FromString(request.body)
        for resource_spans in export.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans.extend(scope_spans.spans)
    return spans


def _attributes(span) -> dict:
    values = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        values[kv.key] = getattr(kv.value, kind)
    return values


@pytest.fixture
def web(tmp_path):
    started: list[Web] = []

    def start(**env: str) -> Web:
        started.append(Web(tmp_path, f"web{len(started)}", env=env))
        return started[-1]

    yield start
    for one in started:
        one.process.stop()


def _otel(endpoint: str) -> dict[str, str]:
    # A short batch delay: the test waits for spans, not the default five seconds.
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_TRACES_SAMPLER": "always_on",
    }


def test_a_producers_trace_runs_through_every_attempt_to_the_receiver(
    alice, homing, receiver_factory, web, settings
):
    settings.HOMING_RETRY_SCHEDULE = "1s,2s"
    settings.HOMING_RETRY_JITTER = 0.0
    otlp = receiver_factory(lambda request, n: Answer(200, b""))
    otel = _otel(otlp.url.rsplit("/", 1)[0])
    shop = receiver_factory(lambda request, n: Answer(503 if n < 2 else 200))
    endpoint = alice.client.post("/api/v1/endpoints", {"url": shop.url}, format="json").json()
    homing("worker", **otel)
    homing("scheduler")
    server = web(**otel)

    status, event = server.call(
        "POST",
        "/api/v1/events",
        key=alice.key,
        body={"type": "order.paid", "data": {"n": 1}},
        headers={"traceparent": TRACEPARENT, "tracestate": "shop=1"},
    )

    assert status == 202
    webhooks = shop.wait_for(3, timeout=60)
    delivery_id = event["deliveries"][0]["id"]
    wait_until(lambda: Delivery.objects.get(pk=delivery_id).status == "succeeded")
    # The receiver continues the producer's trace, from each attempt's own span.
    sent = [w.headers["traceparent"].split("-") for w in webhooks]
    assert {(version, trace_id, flags) for version, trace_id, _, flags in sent} == {
        ("00", TRACE_ID, "01")
    }
    assert len({span_id for _, _, span_id, _ in sent}) == 3
    assert {w.headers["tracestate"] for w in webhooks} == {"shop=1"}

    def exported() -> bool:
        names = Counter(s.name for s in _spans(otlp))
        return names["webhook attempt"] >= 3 and names["POST /api/v1/events"] >= 1

    wait_until(exported, timeout=30, message="the spans were not exported")
    spans = [s for s in _spans(otlp) if s.trace_id.hex() == TRACE_ID]
    [ingest] = [s for s in spans if s.name == "POST /api/v1/events"]
    assert ingest.parent_span_id.hex() == PRODUCER_SPAN
    assert [e.name for e in ingest.events] == ["event"]
    assert _attributes(ingest.events[0])["homing.event_id"] == event["id"]
    attempts = sorted(
        (s for s in spans if s.name == "webhook attempt"),
        key=lambda s: _attributes(s)["homing.attempt"],
    )
    assert [s.parent_span_id.hex() for s in attempts] == [PRODUCER_SPAN] * 3
    assert [s.span_id.hex() for s in attempts] == [span_id for _, _, span_id, _ in sent]
    described = [_attributes(s) for s in attempts]
    assert [(a["homing.attempt"], a["http.response.status_code"]) for a in described] == [
        (1, 503),
        (2, 503),
        (3, 200),
    ]
    assert [a["homing.outcome"] for a in described] == ["retryable", "retryable", "success"]
    assert {a["homing.endpoint_id"] for a in described} == {endpoint["id"]}
    assert {a["homing.tenant_id"] for a in described} == {alice.tenant.pk}
    assert {a["homing.event_type"] for a in described} == {"order.paid"}
    assert [s.status.code for s in attempts] == [
        Status.STATUS_CODE_ERROR,
        Status.STATUS_CODE_ERROR,
        Status.STATUS_CODE_UNSET,
    ]
    # The statistics count exactly the attempts made.
    stats = alice.client.get(f"/api/v1/endpoints/{endpoint['id']}/stats?period=1h").json()
    made = Attempt.objects.filter(delivery_id=delivery_id)
    assert made.count() == 3
    assert stats["attempts"] == {"success": 1, "retryable": 2, "fatal": 0}
    assert stats["deliveries"] == {"pending": 0, "delivering": 0, "succeeded": 1, "dead": 0}
    assert sum(b["retryable"] for b in stats["buckets"]) == 2


def test_an_exporter_that_is_down_neither_slows_nor_loses_deliveries(
    alice, homing, receiver_factory, web
):
    # One exporter endpoint refuses connections, the other accepts them and never answers.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    hanging = receiver_factory(lambda request, n: Answer(200, b"", delay=60))
    shop = receiver_factory()
    alice.client.post("/api/v1/endpoints", {"url": shop.url}, format="json")
    homing("worker", **_otel(hanging.url.rsplit("/", 1)[0]))
    server = web(**_otel(f"http://127.0.0.1:{closed_port}"))

    for n in range(40):
        status, _ = server.call(
            "POST", "/api/v1/events", key=alice.key, body={"type": "a.b", "data": {"n": n}}
        )
        assert status == 202

    webhooks = shop.wait_for(40, timeout=60)
    assert sorted(int(w.body.split(b'"n":')[1].split(b"}")[0]) for w in webhooks) == list(range(40))
    wait_until(
        lambda: Delivery.objects.filter(status="succeeded").count() == 40,
        timeout=30,
        message="deliveries were lost or stuck",
    )


def test_with_tracing_off_the_webhook_carries_the_producers_context_as_it_came(
    alice, homing, receiver_factory
):
    shop = receiver_factory()
    alice.client.post("/api/v1/endpoints", {"url": shop.url}, format="json")
    homing("worker")  # no OTEL_* variable: no tracer, no span
    traced = alice.client.post(
        "/api/v1/events",
        {"type": "a.b", "data": {}},
        format="json",
        HTTP_TRACEPARENT=TRACEPARENT,
        HTTP_TRACESTATE="shop=1",
    ).json()
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")

    webhooks = shop.wait_for(2)

    [first] = [w for w in webhooks if w.headers["webhook-id"] == traced["id"]]
    [second] = [w for w in webhooks if w.headers["webhook-id"] != traced["id"]]
    assert (first.headers["traceparent"], first.headers["tracestate"]) == (TRACEPARENT, "shop=1")
    assert "traceparent" not in second.headers and "tracestate" not in second.headers


# What a worker and a web process import on their way up (run_worker's Worker, the WSGI
# application with every route), then the modules of span code among those loaded.
_IMPORTS = """
import sys
import django
django.setup()
import config.wsgi, config.urls, deliveries.worker.worker
from core import tracing
tracing.tracing_start(service="homing-test")
span_code = ("opentelemetry.sdk.trace", "opentelemetry.exporter", "deliveries.worker.attempt_span")
print(sorted(m for m in sys.modules if m.startswith(span_code)))
"""


def test_with_tracing_off_no_process_loads_span_code(tmp_path) -> None:
    """DESIGN.md 26: without the variables neither the SDK's tracing nor an exporter is
    loaded, nor a span module of ours. (redis-py 8 loads OpenTelemetry's API and metrics
    SDK for metrics of its own, off unless an application turns them on.)"""
    off = subprocess.run(
        [sys.executable, "-c", _IMPORTS],
        env={k: v for k, v in process_env().items() if not k.startswith("OTEL_")},
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert off.stdout.strip().splitlines()[-1] == "[]"
    on = subprocess.run(
        [sys.executable, "-c", _IMPORTS],
        env={**process_env(), **_otel("http://127.0.0.1:9")},
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "opentelemetry.sdk.trace" in on.stdout
