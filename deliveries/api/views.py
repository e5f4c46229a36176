from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import QueryFilter, QueryFilters, id_filter
from api.schema import errors
from api.scoping import TenantScoped
from deliveries.api.serializers import DeliverySerializer
from deliveries.models import Delivery
from deliveries.services.lifecycle import delivery_retry_now


class DeliveryList(TenantScoped, generics.ListAPIView):
    model = Delivery
    serializer_class = DeliverySerializer
    filter_backends = [QueryFilters]
    query_filters = [
        QueryFilter(
            "status",
            "status",
            "Only deliveries in this status.",
            choices={value: value for value in Delivery.Status.values},
        ),
        id_filter("endpoint", "endpoint_id", "endpoint"),
        id_filter("event", "event_id", "event"),
    ]

    def get_queryset(self) -> QuerySet[Delivery]:
        return super().get_queryset().prefetch_related("attempts")


class DeliveryDetail(TenantScoped, generics.RetrieveAPIView):
    model = Delivery
    serializer_class = DeliverySerializer

    def get_queryset(self) -> QuerySet[Delivery]:
        return super().get_queryset().prefetch_related("attempts")


class DeliveryRetry(TenantScoped, generics.GenericAPIView):
    model = Delivery
    serializer_class = DeliverySerializer

    @extend_schema(
        request=None,
        responses={202: DeliverySerializer, **errors(409)},
        description="One more attempt now, whatever the status. Reads no request body.",
    )
    def post(self, request: Request, pk: str) -> Response:
        delivery = delivery_retry_now(delivery=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
