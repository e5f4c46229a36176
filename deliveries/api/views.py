from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import QueryFilter, QueryFilters, id_filter
from api.schema import errors
from api.scoping import TenantScoped
from deliveries.api.serializers import (
    DeliverySerializer,
    FeedExpiredSerializer,
    FeedPageSerializer,
    FeedQuerySerializer,
)
from deliveries.models import Delivery
from deliveries.selectors import endpoint_messages
from deliveries.services.lifecycle import delivery_retry_now
from deliveries.statuses import public_status
from webhooks.models import Endpoint


class DeliveryList(TenantScoped, generics.ListAPIView):
    model = Delivery
    serializer_class = DeliverySerializer
    consumer_allowed = True
    filter_backends = [QueryFilters]
    query_filters = [
        QueryFilter(
            "status",
            "status__in",
            "Only deliveries in this status.",
            # Held deliveries are pending to the API (waiting, with `blocked_by`).
            choices={
                status: [s for s in Delivery.Status.values if public_status(s) == status]
                for status in Delivery.Status.values
                if public_status(status) == status
            },
        ),
        id_filter("endpoint", "endpoint_id", "endpoint"),
        id_filter("event", "event_id", "event"),
    ]

    def get_queryset(self) -> QuerySet[Delivery]:
        return super().get_queryset().prefetch_related("attempts")


class DeliveryDetail(TenantScoped, generics.RetrieveAPIView):
    model = Delivery
    serializer_class = DeliverySerializer
    consumer_allowed = True

    def get_queryset(self) -> QuerySet[Delivery]:
        return super().get_queryset().prefetch_related("attempts")


class DeliveryRetry(TenantScoped, generics.GenericAPIView):
    model = Delivery
    serializer_class = DeliverySerializer
    consumer_allowed = True

    @extend_schema(
        request=None,
        responses={202: DeliverySerializer, **errors(409)},
        description="One more attempt now, whatever the status. Reads no request body.",
    )
    def post(self, request: Request, pk: str) -> Response:
        delivery = delivery_retry_now(delivery=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class EndpointMessages(TenantScoped, generics.GenericAPIView):
    """The catch-up feed: every delivery of the endpoint after a sequence, in order."""

    model = Endpoint
    serializer_class = FeedPageSerializer
    consumer_allowed = True

    @extend_schema(
        parameters=[FeedQuerySerializer],
        responses={200: FeedPageSerializer, 410: FeedExpiredSerializer},
    )
    def get(self, request: Request, pk: str) -> Response:
        endpoint = self.get_object()
        query = FeedQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = endpoint_messages(endpoint=endpoint, **query.validated_data)  # or FeedExpired: 410
        return Response(FeedPageSerializer(page).data)
