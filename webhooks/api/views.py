"""Thin views: parse, call one service or selector, shape the answer."""

from __future__ import annotations

import json
import re
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
    endpoint_send_test,
    endpoint_update,
)
from webhooks.services.events import event_ingest
from webhooks.services.idempotency import idempotent_call, request_fingerprint

IDEMPOTENCY_KEY = re.compile(r"^[\x20-\x7e]{1,255}$")  # printable ASCII


class EndpointList(TenantScoped, generics.ListCreateAPIView):
    model = Endpoint
    serializer_class = EndpointSerializer

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = endpoint_create(tenant=self.request.auth, **serializer.validated_data)


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
        return Response({"secret": endpoint.secret})


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
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="Replays the first answer for 24 h",
            )
        ],
    )
    def post(self, request: Request) -> HttpResponse:
        payload = _json_body(request)
        key = _idempotency_key(request)
        incoming = EventCreateSerializer(data=payload)
        incoming.is_valid(raise_exception=True)

        def produce() -> tuple[int, bytes]:
            event = event_ingest(
                tenant=request.auth,
                event_type=incoming.validated_data["type"],
                data=incoming.validated_data["data"],
            )
            return status.HTTP_202_ACCEPTED, JSONRenderer().render(EventSerializer(event).data)

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


class EventDetail(TenantScoped, generics.RetrieveAPIView):
    model = Event
    serializer_class = EventSerializer

    def get_queryset(self) -> QuerySet[Event]:
        return super().get_queryset().prefetch_related("deliveries")


def _json_body(request: Request) -> Any:
    limit = settings.HOMING_MAX_PAYLOAD_BYTES
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if (declared.isdigit() and int(declared) > limit) or len(request.body) > limit:
        raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
    try:
        return json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise serializers.ValidationError({"body": [f"Not valid JSON: {exc}"]}) from exc


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is not None and not IDEMPOTENCY_KEY.match(key):
        raise serializers.ValidationError(
            {"Idempotency-Key": ["Must be 1 to 255 printable ASCII characters."]}
        )
    return key
