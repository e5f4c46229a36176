"""POST /events and POST /events/batch as plain Django views, without DRF's dispatch.

DRF's request cycle (request wrapping, content negotiation, authentication and permission
classes, throttle checks, response finalizing) cost a good share of the web process's
CPU per event. These two POSTs skip it and answer exactly what the DRF views answered
(CONTRACT section 2): the same status codes and JSON error bodies, the 401 challenge,
the `Allow` header, the byte-identical 202 body and the Idempotency-Key semantics. Every
other method on these routes (the GET list, OPTIONS, a 405) still goes to the DRF view,
whose `post` documents the route in the OpenAPI schema and delegates here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from api.errors import api_error_response, render_json
from core import tracing
from core.exceptions import Busy, HomingError, InvalidInput, PayloadTooLarge
from deliveries.intake.backpressure import intake_admit, intake_admitted
from deliveries.intake.ingest import IngestedEvent, events_ingest
from deliveries.statuses import public_status
from webhooks.api.authentication import ApiKeyRefused, tenant_from_authorization
from webhooks.models import Tenant
from webhooks.services.event_input import (
    EventInput,
    event_batch_validate,
    event_input_validate,
    json_body_parse,
)
from webhooks.services.event_types import events_data_check
from webhooks.services.idempotency import idempotent_call, request_fingerprint

IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")  # printable ASCII

# Parsed JSON takes up to 25 times its size (8 MiB of `{},` is 200 MB of dicts), so a
# burst of large batches could exhaust a web process's memory, every tenant's requests
# with it: a process parses at most LARGE_BODIES_AT_ONCE bodies over LARGE_BODY_BYTES at
# a time; another waits up to LARGE_BODY_WAIT_SECONDS, then gets a 503 and Retry-After.
LARGE_BODY_BYTES = 1024 * 1024
LARGE_BODIES_AT_ONCE = 2
LARGE_BODY_WAIT_SECONDS = 5.0
_large_bodies = threading.BoundedSemaphore(LARGE_BODIES_AT_ONCE)


def post_without_drf(
    drf_view: Callable[..., HttpResponse], handler: Callable[[HttpRequest], HttpResponse]
) -> Callable[..., HttpResponse]:
    """`drf_view` with its POST served by `handler`; what DRF set on it (`cls` for the
    schema, `csrf_exempt`) is kept."""
    instance = drf_view.cls(**drf_view.initkwargs)  # type: ignore[attr-defined]  # set by as_view()
    if hasattr(instance, "get") and not hasattr(instance, "head"):
        instance.head = instance.get  # as View.setup() does for each request
    allowed = ", ".join(instance.allowed_methods)

    @functools.wraps(drf_view)
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "POST":
            return drf_view(request, *args, **kwargs)
        response = handler(request)
        response["Allow"] = allowed  # as DRF sets on every answer
        return response

    return view


def event_create(request: HttpRequest) -> HttpResponse:
    """POST /events: one `{type, data}`."""
    return _accept(request, limit=settings.HOMING_MAX_PAYLOAD_BYTES, validate=_one, shape=_single)


def event_batch_create(request: HttpRequest) -> HttpResponse:
    """POST /events/batch: `{"events": [...]}`, all accepted or none."""
    return _accept(request, limit=settings.HOMING_MAX_BATCH_BYTES, validate=_batch, shape=_many)


def _one(payload: Any, body: bytes) -> list[EventInput]:
    return [event_input_validate(payload)]


def _batch(payload: Any, body: bytes) -> list[EventInput]:
    return event_batch_validate(
        payload,
        max_events=settings.HOMING_MAX_BATCH_EVENTS,
        max_item_bytes=settings.HOMING_MAX_PAYLOAD_BYTES,
        body_bytes=len(body),
    )


def _single(events: Sequence[IngestedEvent]) -> dict[str, Any]:
    return event_accepted(events[0])


def _many(events: Sequence[IngestedEvent]) -> dict[str, Any]:
    return {"events": [event_accepted(event) for event in events]}


def _accept(
    request: HttpRequest,
    *,
    limit: int,
    validate: Callable[[Any, bytes], list[EventInput]],
    shape: Callable[[Sequence[IngestedEvent]], dict[str, Any]],
) -> HttpResponse:
    """Authenticate, parse, validate, then ingest (or replay) and answer; in DRF's order."""
    try:
        tenant = tenant_from_authorization(request.META.get("HTTP_AUTHORIZATION", ""))
        key = _idempotency_key(request)
        body = _body(request, limit)
        # The producer's trace context (W3C headers; an invalid one is ignored).
        context = None
        if "HTTP_TRACEPARENT" in request.META:
            context = tracing.trace_context_of(
                request.META["HTTP_TRACEPARENT"], request.META.get("HTTP_TRACESTATE")
            )
        with _memory_for(body):
            # The parsed body lives in _parse_and_ingest's frame only, so it is freed before
            # the place is given back, whether that answered 202 or an error.
            if tracing.tracer is None:
                return _parse_and_ingest(
                    tenant, key, body, validate=validate, shape=shape, context=context
                )
            with _ingest_span(request, tenant, context) as (span, own):
                response = _parse_and_ingest(
                    tenant, key, body, validate=validate, shape=shape, context=context or own
                )
                span.set_attribute("http.response.status_code", response.status_code)
                return response
    except (ApiKeyRefused, HomingError) as exc:
        return api_error_response(exc)


@contextlib.contextmanager
def _ingest_span(
    request: HttpRequest, tenant: Tenant, context: str | None
) -> Iterator[tuple[Any, str | None]]:
    """The ingest request's span (tracing on only), a child of the producer's context;
    yields it with its own trace context, which events that came without one keep, so
    their attempts still join the trace of the request that brought them."""
    assert tracing.tracer is not None
    from opentelemetry.trace import SpanKind

    with tracing.tracer.start_as_current_span(
        f"POST {request.path}",
        context=tracing.parent_of(context),
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": "POST",
            "url.path": request.path,
            **tracing.attributes_of(tenant_id=tenant.pk),
        },
    ) as span:
        yield span, tracing.span_trace_context(span)


def _parse_and_ingest(
    tenant: Tenant,
    key: str | None,
    body: bytes,
    *,
    validate: Callable[[Any, bytes], list[EventInput]],
    shape: Callable[[Sequence[IngestedEvent]], dict[str, Any]],
    context: str | None,
) -> HttpResponse:
    try:
        payload = json_body_parse(body=body)
        inputs = validate(payload, body)
        if context is not None:  # a batch item's own traceparent wins over the request's
            inputs = [
                i if i.trace_context else dataclasses.replace(i, trace_context=context)
                for i in inputs
            ]
        events_data_check(
            tenant=tenant,
            inputs=inputs,
            mode=settings.HOMING_VALIDATE_EVENTS,
            batch=validate is _batch,
        )
        # Before anything is written, the idempotency record included: a 429 leaves no trace.
        intake_admit(tenant=tenant, events=len(inputs))

        def produce() -> tuple[int, bytes]:
            events = events_ingest(tenant=tenant, inputs=inputs)
            intake_admitted(tenant=tenant, deliveries=sum(len(e.deliveries) for e in events))
            if tracing.tracer is not None:
                _events_on_span(events)
            return 202, render_json(shape(events))

        return _answer(tenant, key=key, payload=payload, produce=produce)
    except HomingError as exc:
        return api_error_response(exc)


def _events_on_span(events: Sequence[IngestedEvent]) -> None:
    """One span event per ingested event on the ingest span (a batch is one span)."""
    from opentelemetry import trace

    span = trace.get_current_span()
    span.set_attribute("homing.events", len(events))
    for event in events:
        span.add_event(
            "event",
            {
                "homing.event_id": event.id,
                "homing.event_type": event.type,
                "homing.deliveries": len(event.deliveries),
            },
        )


def _idempotency_key(request: HttpRequest) -> str | None:
    key = request.META.get("HTTP_IDEMPOTENCY_KEY")
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidInput("Idempotency-Key", "Must be 1 to 255 printable ASCII characters.")
    return key


def _body(request: HttpRequest, limit: int) -> bytes:
    """The raw body, refused with a 413 before reading it when it says it is too large."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if (declared.isdigit() and int(declared) > limit) or len(request.body) > limit:
        raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
    return request.body


@contextlib.contextmanager
def _memory_for(body: bytes) -> Iterator[None]:
    """Hold one of the large-body places while a large body is parsed and ingested."""
    if len(body) <= LARGE_BODY_BYTES:
        yield
        return
    if not _large_bodies.acquire(timeout=LARGE_BODY_WAIT_SECONDS):
        raise Busy("Too many large requests at once on this server; send it again shortly.")
    try:
        yield
    finally:
        _large_bodies.release()


def _answer(
    tenant: Tenant, *, key: str | None, payload: Any, produce: Callable[[], tuple[int, bytes]]
) -> HttpResponse:
    """Run `produce`, or replay what it answered the first time under this key."""
    if key is None:
        code, body = produce()
        return HttpResponse(body, status=code, content_type="application/json")
    result = idempotent_call(
        tenant=tenant, key=key, fingerprint=request_fingerprint(payload), produce=produce
    )
    response = HttpResponse(result.body, status=result.status, content_type="application/json")
    if result.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


def event_accepted(event: IngestedEvent) -> dict[str, Any]:
    """The 202 body of one event, field for field what EventSerializer renders."""
    return {
        "id": event.id,
        "type": event.type,
        "data": event.data,
        "ordering_key": event.ordering_key,
        "created_at": _iso(event.created_at),
        "deliveries": [
            {
                "id": delivery.id,
                "endpoint_id": delivery.endpoint_id,
                "sequence": delivery.sequence,
                "status": public_status(delivery.status),
            }
            for delivery in event.deliveries
        ],
    }


@functools.lru_cache(maxsize=64)  # the events of a batch share their moment
def _iso(moment: datetime) -> str:
    text = moment.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
