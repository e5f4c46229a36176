from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.pagination import NewestFirstPagination
from api.scoping import TenantScoped
from dlq.api.serializers import BulkReplaySerializer, DeadLetterSerializer, ReplayedSerializer
from dlq.models import DeadLetter
from dlq.services.replay import dead_letter_replay, dead_letters_replay


class DeadLetterPagination(NewestFirstPagination):
    ordering = "-dead_at"


class DeadLetterList(TenantScoped, generics.ListAPIView):
    model = DeadLetter
    serializer_class = DeadLetterSerializer

    def get_queryset(self) -> QuerySet[DeadLetter]:
        letters = super().get_queryset()
        params = self.request.query_params
        if endpoint := params.get("endpoint"):
            letters = letters.filter(endpoint_id=endpoint)
        if event_type := params.get("event_type"):
            letters = letters.filter(event_type=event_type)
        if (replayed := params.get("replayed")) is not None:
            letters = letters.filter(replayed_at__isnull=replayed.lower() not in ("true", "1"))
        return letters

    pagination_class = DeadLetterPagination


class DeadLetterReplay(TenantScoped, generics.GenericAPIView):
    model = DeadLetter
    serializer_class = DeadLetterSerializer

    def get_queryset(self) -> QuerySet[DeadLetter]:
        return super().get_queryset().select_related("endpoint")

    def post(self, request: Request, pk: str) -> Response:
        letter = self.get_object()
        dead_letter_replay(dead_letter=letter)
        letter.refresh_from_db()
        return Response(DeadLetterSerializer(letter).data, status=status.HTTP_202_ACCEPTED)


class DeadLetterBulkReplay(TenantScoped, generics.GenericAPIView):
    model = DeadLetter
    serializer_class = BulkReplaySerializer

    @extend_schema(responses={202: ReplayedSerializer})
    def post(self, request: Request) -> Response:
        criteria = BulkReplaySerializer(data=request.data)
        criteria.is_valid(raise_exception=True)
        letters = self.get_queryset().filter(replayed_at__isnull=True).select_related("endpoint")
        if "ids" in criteria.validated_data:
            letters = letters.filter(pk__in=criteria.validated_data["ids"])
        if "endpoint" in criteria.validated_data:
            letters = letters.filter(endpoint_id=criteria.validated_data["endpoint"])
        if "event_type" in criteria.validated_data:
            letters = letters.filter(event_type=criteria.validated_data["event_type"])
        replayed = dead_letters_replay(dead_letters=letters.iterator())
        return Response({"replayed": replayed}, status=status.HTTP_202_ACCEPTED)
