"""Thin views: parse, call one service or selector, shape the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import QueryFilter, QueryFilters, event_type_filter
from api.schema import RETRY_AFTER, RETRY_AFTER_IF_GIVEN, errors
from api.scoping import TenantScoped
from deliveries.services.events import endpoint_send_test
from webhooks.api import intake
from webhooks.api.serializers import (
    ConsumerKeyCreateSerializer,
    ConsumerKeySerializer,
    ConsumerKeyWithKeySerializer,
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
from webhooks.models import ConsumerKey, Endpoint, Event
from webhooks.services.consumer_keys import consumer_key_create, consumer_key_revoke
from webhooks.services.endpoint_rules import endpoint_fields_for_scope
from webhooks.services.endpoints import (
    endpoint_create,
    endpoint_delete,
    endpoint_rotate_secret,
    endpoint_secret,
    endpoint_update,
)

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "pattern": f"^{intake.IDEMPOTENCY_KEY.pattern}$"},
    OpenApiParameter.HEADER,
    description="Replays the first answer, byte for byte, for HOMING_IDEMPOTENCY_TTL",
)
# What POST /events and POST /events/batch answer besides 202 and 400.
INTAKE_ERRORS = errors(409, 422, 429, 503)
INTAKE_PARAMETERS = [IDEMPOTENCY_PARAMETER, RETRY_AFTER, RETRY_AFTER_IF_GIVEN]
NO_BODY = "Reads no request body (one sent is ignored)."


class EndpointList(TenantScoped, generics.ListCreateAPIView):
    model = Endpoint
    serializer_class = EndpointSerializer
    consumer_allowed = True
    filter_backends = [QueryFilters]
    query_filters = [
        QueryFilter(
            "owner",
            "owner",
            "Only the endpoints of this owner.",
            pattern=r"[^\x00-\x1f\x7f-\x9f]{1,255}",
        )
    ]

    @extend_schema(responses={201: EndpointWithSecretSerializer})
    def post(self, request: Request) -> Response:
        incoming = EndpointSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        scope = request.auth
        fields = dict(incoming.validated_data)
        if scope.is_consumer:
            fields.pop("owner", None)  # forced to the consumer's own, whatever the body says
        fields = endpoint_fields_for_scope(scope=scope, fields=fields)
        endpoint = endpoint_create(tenant=scope.tenant, **fields)
        # The one endpoint body that shows the secret: the caller has just created it.
        body = {**EndpointSerializer(endpoint).data, "secret": endpoint_secret(endpoint=endpoint)}
        return Response(body, status=status.HTTP_201_CREATED)


class EndpointDetail(TenantScoped, generics.RetrieveUpdateDestroyAPIView):
    model = Endpoint
    serializer_class = EndpointSerializer
    http_method_names = ["get", "patch", "delete", "options"]
    consumer_allowed = True

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        fields = endpoint_fields_for_scope(
            scope=self.request.auth, fields=dict(serializer.validated_data)
        )
        serializer.instance = endpoint_update(endpoint=serializer.instance, **fields)

    def perform_destroy(self, instance: Endpoint) -> None:
        endpoint_delete(endpoint=instance)


class EndpointRotateSecret(TenantScoped, generics.GenericAPIView):
    model = Endpoint
    serializer_class = SecretSerializer
    consumer_allowed = True

    @extend_schema(request=None, responses={200: SecretSerializer}, description=NO_BODY)
    def post(self, request: Request, pk: str) -> Response:
        endpoint = endpoint_rotate_secret(endpoint=self.get_object())
        return Response({"secret": endpoint_secret(endpoint=endpoint)})


class EndpointSecret(TenantScoped, generics.GenericAPIView):
    """GET /endpoints/{id}/secret: the current secret, asked for on purpose."""

    model = Endpoint
    serializer_class = SecretSerializer
    consumer_allowed = True

    def get(self, request: Request, pk: str) -> Response:
        return Response({"secret": endpoint_secret(endpoint=self.get_object())})


class EndpointSendTest(TenantScoped, generics.GenericAPIView):
    model = Endpoint
    serializer_class = TestEventSerializer
    consumer_allowed = True

    @extend_schema(
        request=None, responses={202: TestEventSerializer, **errors(409)}, description=NO_BODY
    )
    def post(self, request: Request, pk: str) -> Response:
        event, delivery = endpoint_send_test(endpoint=self.get_object())
        return Response(
            {"event_id": event.id, "delivery_id": delivery.id}, status=status.HTTP_202_ACCEPTED
        )


class EventList(TenantScoped, generics.ListAPIView):
    model = Event
    serializer_class = EventSummarySerializer
    filter_backends = [QueryFilters]
    query_filters = [event_type_filter("type", "type")]
    page_weight_field = "data"  # a page stops short of MAX_PAGE_BYTES of event data
    reads_any_content_type = True  # POST is intake's: no 415 (api.schema)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponse]:
        return intake.post_without_drf(super().as_view(**initkwargs), intake.event_create)

    @extend_schema(
        request=EventCreateSerializer,
        responses={202: EventSerializer, **INTAKE_ERRORS},
        parameters=INTAKE_PARAMETERS,
    )
    def post(self, request: Request) -> HttpResponse:
        # Documents the route; `as_view` hands POST to intake.event_create directly.
        return intake.event_create(request._request)


class EventBatch(generics.GenericAPIView):
    """Many events in one request and one transaction: all are accepted or none."""

    serializer_class = EventBatchCreateSerializer  # OPTIONS describes it (it was a 500)
    reads_any_content_type = True  # POST is intake's: no 415 (api.schema)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponse]:
        return intake.post_without_drf(super().as_view(**initkwargs), intake.event_batch_create)

    @extend_schema(
        request=EventBatchCreateSerializer,
        responses={202: EventBatchSerializer, **INTAKE_ERRORS},
        parameters=INTAKE_PARAMETERS,
        description=(
            "1 to HOMING_MAX_BATCH_EVENTS events, each as for POST /events. All or nothing: "
            "an invalid item is a 400 naming it (`events[3].type`) and nothing is written."
        ),
    )
    def post(self, request: Request) -> HttpResponse:
        # Documents the route; `as_view` hands POST to intake.event_batch_create directly.
        return intake.event_batch_create(request._request)


class EventDetail(TenantScoped, generics.RetrieveAPIView):
    model = Event
    serializer_class = EventSerializer

    def get_queryset(self) -> QuerySet[Event]:
        return super().get_queryset().prefetch_related("deliveries")


class ConsumerKeyList(TenantScoped, generics.ListAPIView):
    """The tenant's live consumer keys (a consumer key gets 403: keys are the tenant's)."""

    model = ConsumerKey
    serializer_class = ConsumerKeySerializer

    def get_queryset(self) -> QuerySet[ConsumerKey]:
        return super().get_queryset().filter(revoked_at__isnull=True)

    @extend_schema(
        request=ConsumerKeyCreateSerializer, responses={201: ConsumerKeyWithKeySerializer}
    )
    def post(self, request: Request) -> Response:
        incoming = ConsumerKeyCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        key, raw_key = consumer_key_create(tenant=request.auth.tenant, **incoming.validated_data)
        body = {**ConsumerKeySerializer(key).data, "key": raw_key}
        return Response(body, status=status.HTTP_201_CREATED)


class ConsumerKeyDetail(TenantScoped, generics.GenericAPIView):
    model = ConsumerKey
    serializer_class = ConsumerKeySerializer

    def get_queryset(self) -> QuerySet[ConsumerKey]:
        return super().get_queryset().filter(revoked_at__isnull=True)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: str) -> Response:
        consumer_key_revoke(consumer_key=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
