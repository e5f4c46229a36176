"""Tracing off costs nothing per attempt (DESIGN.md 26): a worker sending real webhooks
runs no span code and no OpenTelemetry function, as a profile of every thread shows; the
same profile with tracing on finds the attempt spans (so the probe sees them when they
are there). The webhooks still carry the producer's trace context as it came."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from core import tracing
from deliveries.models import Delivery
from deliveries.worker.worker import Worker
from tests.backlogs import due_backlog
from tests.processes import wait_until
from tests.receivers import Answer, Receiver
from webhooks.models import Event
from webhooks.services.endpoints import endpoint_create
from webhooks.services.tenants import tenant_create

pytestmark = pytest.mark.django_db(transaction=True)

COUNT = 10
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SPAN_CODE = ("/opentelemetry/", "deliveries/worker/attempt_span.py")


@pytest.fixture
def receiver():
    started = Receiver(lambda request, n: Answer()).start()
    yield started
    started.stop()


@contextmanager
def functions_called() -> Iterator[set[str]]:
    """The source files of every Python function called meanwhile, in any thread
    started meanwhile too (the worker's)."""
    files: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            files.add(frame.f_code.co_filename)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield files
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def _deliver_all(receiver: Receiver) -> tuple[set[str], list]:
    tenant, _ = tenant_create(name="Traced")
    endpoint = endpoint_create(tenant=tenant, url=receiver.url)
    due_backlog(tenant, endpoint, COUNT)
    Event.objects.update(trace_context=PARENT)
    with functions_called() as files:
        worker = Worker(capacity=20).start()
        try:
            requests = receiver.wait_for(COUNT, timeout=30)
            wait_until(
                lambda: Delivery.objects.filter(status="succeeded").count() == COUNT,
                timeout=15,
                message="not every delivery was recorded",
            )
        finally:
            worker.stop()
            worker.drain(timeout=5)
            worker.close()
    return files, requests


def test_with_tracing_off_an_attempt_runs_no_span_code(receiver, monkeypatch) -> None:
    monkeypatch.setattr(tracing, "tracer", None)

    files, requests = _deliver_all(receiver)

    assert not [f for f in files if any(part in f for part in SPAN_CODE)]
    # Nothing is lost for it: the producer's context goes along as it came.
    assert {r.headers["traceparent"] for r in requests} == {PARENT}


def test_with_tracing_on_the_same_profile_finds_the_attempt_spans(receiver, monkeypatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", provider.get_tracer("test"))

    files, requests = _deliver_all(receiver)

    assert any(f.endswith("deliveries/worker/attempt_span.py") for f in files)
    assert any("/opentelemetry/sdk/trace/" in f for f in files)
    attempts = [s for s in exporter.get_finished_spans() if s.name == "webhook attempt"]
    assert len(attempts) == COUNT
    assert {s.context.trace_id for s in attempts} == {int(PARENT.split("-")[1], 16)}
    # Each webhook carries its own attempt span's context, a child of the producer's.
    assert {r.headers["traceparent"].split("-")[1] for r in requests} == {PARENT.split("-")[1]}
    assert PARENT not in {r.headers["traceparent"] for r in requests}
