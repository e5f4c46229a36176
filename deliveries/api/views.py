from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.scoping import TenantScoped
from deliveries.api.serializers import (
    DeliverySerializer,
    FeedExpiredSerializer,
    FeedPageSerializer,
    FeedQuerySerializer,
)
from deliveries.models import Delivery
from deliveries.selectors import FeedExpired, endpoint_messages
from deliveries.services.lifecycle import delivery_retry_now
from webhooks.models import Endpoint

FILTERS = {"status": "status", "endpoint": "endpoint_id", "event": "event_id"}


class DeliveryList(TenantScoped, generics.ListAPIView):
    model = Delivery
    serializer_class = DeliverySerializer
    consumer_allowed = True

    def get_queryset(self) -> QuerySet[Delivery]:
        deliveries = super().get_queryset().prefetch_related("attempts")
        for param, field in FILTERS.items():
            if value := self.request.query_params.get(param):
                deliveries = deliveries.filter(**{field: value})
        return deliveries


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
        try:
            page = endpoint_messages(endpoint=endpoint, **query.validated_data)
        except FeedExpired as expired:
            body = {"message": expired.message, "oldest_sequence": expired.oldest_sequence}
            return Response(body, status=expired.status_code)
        return Response(FeedPageSerializer(page).data)
