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

from api.scoping import TenantScoped
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
    endpoint_send_test,
    endpoint_update,
)

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="Replays the first answer, byte for byte, for HOMING_IDEMPOTENCY_TTL",
)


OWNER_PARAMETER = OpenApiParameter(
    "owner", str, OpenApiParameter.QUERY, description="Only the endpoints of this owner"
)


class EndpointList(TenantScoped, generics.ListCreateAPIView):
    model = Endpoint
    serializer_class = EndpointSerializer
    consumer_allowed = True

    def get_queryset(self) -> QuerySet[Endpoint]:
        endpoints = super().get_queryset()
        if owner := self.request.query_params.get("owner"):
            endpoints = endpoints.filter(owner=owner)
        return endpoints

    @extend_schema(parameters=[OWNER_PARAMETER])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

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

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponse]:
        return intake.post_without_drf(super().as_view(**initkwargs), intake.event_create)

    @extend_schema(
        request=EventCreateSerializer,
        responses={202: EventSerializer},
        parameters=[IDEMPOTENCY_PARAMETER],
    )
    def post(self, request: Request) -> HttpResponse:
        # Documents the route; `as_view` hands POST to intake.event_create directly.
        return intake.event_create(request._request)


class EventBatch(generics.GenericAPIView):
    """Many events in one request and one transaction: all are accepted or none."""

    serializer_class = EventBatchCreateSerializer  # OPTIONS describes it (it was a 500)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponse]:
        return intake.post_without_drf(super().as_view(**initkwargs), intake.event_batch_create)

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
