from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.scoping import TenantScoped
from deliveries.api.serializers import DeliverySerializer
from deliveries.models import Delivery
from deliveries.services.lifecycle import delivery_retry_now

FILTERS = {"status": "status", "endpoint": "endpoint_id", "event": "event_id"}


class DeliveryList(TenantScoped, generics.ListAPIView):
    model = Delivery
    serializer_class = DeliverySerializer

    def get_queryset(self) -> QuerySet[Delivery]:
        deliveries = super().get_queryset().prefetch_related("attempts")
        for param, field in FILTERS.items():
            if value := self.request.query_params.get(param):
                deliveries = deliveries.filter(**{field: value})
        return deliveries


class DeliveryDetail(TenantScoped, generics.RetrieveAPIView):
    model = Delivery
    serializer_class = DeliverySerializer

    def get_queryset(self) -> QuerySet[Delivery]:
        return super().get_queryset().prefetch_related("attempts")


class DeliveryRetry(TenantScoped, generics.GenericAPIView):
    model = Delivery
    serializer_class = DeliverySerializer

    def post(self, request: Request, pk: str) -> Response:
        delivery = delivery_retry_now(delivery=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
