"""Thin views: parse, call one service or selector, shape the answer."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from api.scoping import TenantScoped
from core.exceptions import PayloadTooLarge
from webhooks.api.serializers import (
    EndpointSerializer,
    EndpointWithSecretSerializer,
    EventBatchCreateSerializer,
    EventBatchSerializer,
    EventCreateSerializer,
    EventSerializer,
    EventSummarySerializer,
    SecretSerializer,
    TestEventSerializer,
)
from webhooks.models import Endpoint, Event
from webhooks.services.endpoints import (
    endpoint_create,
    endpoint_delete,
    endpoint_rotate_secret,
    endpoint_secret,
    endpoint_send_test,
    endpoint_update,
)
from webhooks.services.event_input import (
    event_batch_validate,
    event_input_validate,
    json_body_parse,
)
from webhooks.services.events import events_ingest
from webhooks.services.idempotency import idempotent_call, request_fingerprint

IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")  # printable ASCII
IDEMPOTENCY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="Replays the first answer, byte for byte, for HOMING_IDEMPOTENCY_TTL",
)


class EndpointList(TenantScoped, generics.ListCreateAPIView):
    model = Endpoint
    serializer_class = EndpointSerializer

    @extend_schema(responses={201: EndpointWithSecretSerializer})
    def post(self, request: Request) -> Response:
        incoming = EndpointSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        endpoint = endpoint_create(tenant=request.auth, **incoming.validated_data)
        # The one endpoint body that shows the secret: the caller has just created it.
        body = {**EndpointSerializer(endpoint).data, "secret": endpoint_secret(endpoint=endpoint)}
        return Response(body, status=status.HTTP_201_CREATED)


class EndpointDetail(TenantScoped, generics.RetrieveUpdateDestroyAPIView):
    model = Endpoint
    serializer_class = EndpointSerializer
    http_method_names = ["get", "patch", "delete", "options"]

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = endpoint_update(
            endpoint=serializer.instance, **serializer.validated_data
        )

    def perform_destroy(self, instance: Endpoint) -> None:
        endpoint_delete(endpoint=instance)


class EndpointRotateSecret(TenantScoped, generics.GenericAPIView):
    model = Endpoint
    serializer_class = SecretSerializer

    def post(self, request: Request, pk: str) -> Response:
        endpoint = endpoint_rotate_secret(endpoint=self.get_object())
        return Response({"secret": endpoint_secret(endpoint=endpoint)})


class EndpointSecret(TenantScoped, generics.GenericAPIView):
    """GET /endpoints/{id}/secret: the current secret, asked for on purpose."""

    model = Endpoint
    serializer_class = SecretSerializer

    def get(self, request: Request, pk: str) -> Response:
        return Response({"secret": endpoint_secret(endpoint=self.get_object())})


class EndpointSendTest(TenantScoped, generics.GenericAPIView):
    model = Endpoint
    serializer_class = TestEventSerializer

    @extend_schema(request=None, responses={202: TestEventSerializer})
    def post(self, request: Request, pk: str) -> Response:
        event, delivery = endpoint_send_test(endpoint=self.get_object())
        return Response(
            {"event_id": event.id, "delivery_id": delivery.id}, status=status.HTTP_202_ACCEPTED
        )


class EventList(TenantScoped, generics.ListAPIView):
    model = Event
    serializer_class = EventSummarySerializer

    def get_queryset(self) -> QuerySet[Event]:
        events = super().get_queryset()
        if event_type := self.request.query_params.get("type"):
            events = events.filter(type=event_type)
        return events

    @extend_schema(
        request=EventCreateSerializer,
        responses={202: EventSerializer},
        parameters=[IDEMPOTENCY_PARAMETER],
    )
    def post(self, request: Request) -> HttpResponse:
        key = _idempotency_key(request)
        payload = json_body_parse(body=_body(request, settings.HOMING_MAX_PAYLOAD_BYTES))
        item = event_input_validate(payload)

        def produce() -> tuple[int, bytes]:
            [event] = events_ingest(tenant=request.auth, inputs=[item])
            return status.HTTP_202_ACCEPTED, _render(_event_accepted(event))

        return _answer(request, key=key, payload=payload, produce=produce)


class EventBatch(generics.GenericAPIView):
    """Many events in one request and one transaction: all are accepted or none."""

    @extend_schema(
        request=EventBatchCreateSerializer,
        responses={202: EventBatchSerializer},
        parameters=[IDEMPOTENCY_PARAMETER],
        description=(
            "1 to HOMING_MAX_BATCH_EVENTS events, each as for POST /events. All or nothing: "
            "an invalid item is a 400 naming it (`events[3].type`) and nothing is written."
        ),
    )
    def post(self, request: Request) -> HttpResponse:
        key = _idempotency_key(request)
        payload = json_body_parse(body=_body(request, settings.HOMING_MAX_BATCH_BYTES))
        items = event_batch_validate(
            payload,
            max_events=settings.HOMING_MAX_BATCH_EVENTS,
            max_item_bytes=settings.HOMING_MAX_PAYLOAD_BYTES,
            body_bytes=len(request.body),
        )

        def produce() -> tuple[int, bytes]:
            events = events_ingest(tenant=request.auth, inputs=items)
            body = {"events": [_event_accepted(event) for event in events]}
            return status.HTTP_202_ACCEPTED, _render(body)

        return _answer(request, key=key, payload=payload, produce=produce)


class EventDetail(TenantScoped, generics.RetrieveAPIView):
    model = Event
    serializer_class = EventSerializer

    def get_queryset(self) -> QuerySet[Event]:
        return super().get_queryset().prefetch_related("deliveries")


def _body(request: Request, limit: int) -> bytes:
    """The raw body, refused with a 413 before reading it when it says it is too large."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if (declared.isdigit() and int(declared) > limit) or len(request.body) > limit:
        raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
    return request.body


def _answer(
    request: Request, *, key: str | None, payload: Any, produce: Callable[[], tuple[int, bytes]]
) -> HttpResponse:
    """Run `produce`, or replay what it answered the first time under this key."""
    if key is None:
        code, body = produce()
        return HttpResponse(body, status=code, content_type="application/json")
    result = idempotent_call(
        tenant=request.auth, key=key, fingerprint=request_fingerprint(payload), produce=produce
    )
    response = HttpResponse(result.body, status=result.status, content_type="application/json")
    if result.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


def _event_accepted(event: Event) -> dict[str, Any]:
    """The 202 body of one event, field for field what EventSerializer renders."""
    return {
        "id": event.id,
        "type": event.type,
        "data": event.data,
        "created_at": _iso(event.created_at),
        "deliveries": [
            {"id": delivery.id, "endpoint_id": delivery.endpoint_id, "status": delivery.status}
            for delivery in event.deliveries.all()
        ],
    }


def _iso(moment: datetime) -> str:
    text = moment.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


_renderer = JSONRenderer()


def _render(body: dict[str, Any]) -> bytes:
    return _renderer.render(body)


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise serializers.ValidationError(
            {"Idempotency-Key": ["Must be 1 to 255 printable ASCII characters."]}
        )
    return key
