"""Thin views: parse, call one service or selector, shape the answer."""

from __future__ import annotations

from typing import cast

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import QueryFilter, QueryFilters
from api.schema import NO_BODY, errors, unreadable_error
from webhooks.api.scoping import TenantScoped, scope_of
from webhooks.api.serializers import (
    ConsumerKeyCreateSerializer,
    ConsumerKeySerializer,
    ConsumerKeyWithKeySerializer,
    EndpointSerializer,
    EndpointWithSecretSerializer,
    EventTypeSerializer,
    SecretSerializer,
)
from webhooks.models import ConsumerKey, Endpoint, EventType
from webhooks.services.consumer_keys import consumer_key_create, consumer_key_revoke
from webhooks.services.endpoint_rules import endpoint_fields_for_scope
from webhooks.services.endpoints import (
    endpoint_create,
    endpoint_delete,
    endpoint_public_key,
    endpoint_rotate_secret,
    endpoint_secret,
    endpoint_update,
)
from webhooks.services.event_types import (
    event_type_create,
    event_type_delete,
    event_type_update,
)


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
        scope = scope_of(request)
        fields = dict(incoming.validated_data)
        if scope.is_consumer:
            fields.pop("owner", None)  # forced to the consumer's own, whatever the body says
        fields = endpoint_fields_for_scope(scope=scope, fields=fields)
        endpoint = endpoint_create(tenant=scope.tenant, by_consumer=scope.is_consumer, **fields)
        # The one endpoint body that shows the secret: the caller has just created it.
        body = {**EndpointSerializer(endpoint).data, **_secret_body(endpoint)}
        return Response(body, status=status.HTTP_201_CREATED)


class EndpointDetail(TenantScoped, generics.RetrieveUpdateDestroyAPIView):
    model = Endpoint
    serializer_class = EndpointSerializer
    http_method_names = ["get", "patch", "delete", "options"]
    consumer_allowed = True

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        fields = endpoint_fields_for_scope(
            scope=scope_of(self.request), fields=dict(serializer.validated_data)
        )
        endpoint = cast(Endpoint, serializer.instance)  # an update's serializer has its row
        serializer.instance = endpoint_update(endpoint=endpoint, **fields)

    def perform_destroy(self, instance: Endpoint) -> None:
        endpoint_delete(endpoint=instance)


class EndpointRotateSecret(TenantScoped, generics.GenericAPIView):
    model = Endpoint
    serializer_class = SecretSerializer
    consumer_allowed = True

    @extend_schema(request=None, responses={200: SecretSerializer}, description=NO_BODY)
    def post(self, request: Request, pk: str) -> Response:
        endpoint = endpoint_rotate_secret(endpoint=self.get_object())
        return Response(_secret_body(endpoint))


class EndpointSecret(TenantScoped, generics.GenericAPIView):
    """GET /endpoints/{id}/secret: the current secret, asked for on purpose."""

    model = Endpoint
    serializer_class = SecretSerializer
    consumer_allowed = True

    @extend_schema(responses={200: SecretSerializer, **unreadable_error()})
    def get(self, request: Request, pk: str) -> Response:
        return Response(_secret_body(self.get_object()))


def _secret_body(endpoint: Endpoint) -> dict[str, str]:
    """`{secret}`, and `public_key` for an Ed25519 endpoint (its receiver's key)."""
    body = {"secret": endpoint_secret(endpoint=endpoint)}
    if (public_key := endpoint_public_key(endpoint=endpoint)) is not None:
        body["public_key"] = public_key
    return body


class EventTypeScoped(generics.GenericAPIView):
    """The tenant's catalog, whoever of the tenant asks: a consumer key reads it too
    (scope.narrow would hide it, as it hides what belongs to no endpoint), and only the
    tenant's key changes it (403 for a consumer)."""

    serializer_class = EventTypeSerializer
    consumer_reads_only = True
    lookup_field = "name"

    def get_queryset(self) -> QuerySet[EventType]:
        return EventType.objects.filter(tenant_id=scope_of(self.request).tenant_id)


class EventTypeList(EventTypeScoped, generics.ListAPIView):
    @extend_schema(responses={201: EventTypeSerializer, **errors(403)})
    def post(self, request: Request) -> Response:
        incoming = EventTypeSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        entry = event_type_create(tenant=scope_of(request).tenant, **incoming.validated_data)
        return Response(EventTypeSerializer(entry).data, status=status.HTTP_201_CREATED)


class EventTypeDetail(EventTypeScoped, generics.RetrieveUpdateDestroyAPIView):
    http_method_names = ["get", "patch", "delete", "options"]

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        entry = cast(EventType, serializer.instance)
        serializer.instance = event_type_update(event_type=entry, **serializer.validated_data)

    def perform_destroy(self, instance: EventType) -> None:
        event_type_delete(event_type=instance)


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
        key, raw_key = consumer_key_create(
            tenant=scope_of(request).tenant, **incoming.validated_data
        )
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
