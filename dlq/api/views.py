from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import QueryFilter, QueryParameters, event_type_filter, id_filter, query_values
from api.pagination import NewestFirstPagination
from api.schema import RETRY_AFTER, errors
from dlq.api.serializers import (
    BulkSelectionSerializer,
    DeadLetterSerializer,
    DiscardedSerializer,
    EndpointStatsSerializer,
    RecoverSerializer,
    ReplayedSerializer,
    StatsQuerySerializer,
)
from dlq.models import DeadLetter
from dlq.selectors import (
    STATS_PERIODS,
    dead_letters_in_queue,
    dead_letters_matching,
    endpoint_stats,
)
from dlq.services.discard import dead_letter_discard, dead_letters_discard
from dlq.services.replay import dead_letter_replay
from dlq.services.replay_jobs import endpoint_recover, replay_job_create
from webhooks.api.scoping import TenantScoped, scope_of
from webhooks.models import Endpoint


class DeadLetterPagination(NewestFirstPagination):
    ordering = "-dead_at"


# `?replayed=true` keeps the replayed ones (dlq.selectors.Criteria's `replayed`).
REPLAYED = {"true": True, "1": True, "false": False, "0": False}


class InQueue(TenantScoped):
    """The caller's dead letters that were not discarded."""

    def get_queryset(self) -> QuerySet[DeadLetter]:
        return scope_of(self.request).narrow(dead_letters_in_queue())


class DeadLetterList(TenantScoped, generics.ListAPIView):
    serializer_class = DeadLetterSerializer
    consumer_allowed = True
    pagination_class = DeadLetterPagination
    filter_backends = [QueryParameters]
    # Each filter's `field` is its key in dlq.selectors.Criteria: the selector the
    # console and bulk replay ask applies them.
    query_filters = [
        id_filter("endpoint", "endpoint", "endpoint"),
        event_type_filter("event_type", "event_type"),
        QueryFilter(
            "replayed",
            "replayed",
            "Only replayed ones (true) or only those still waiting (false).",
            choices=REPLAYED,
        ),
    ]

    def get_queryset(self) -> QuerySet[DeadLetter]:
        criteria = query_values(self.request, self.query_filters)
        return dead_letters_matching(criteria=scope_of(self.request).criteria(**criteria))


class DeadLetterDetail(InQueue, generics.GenericAPIView):
    serializer_class = DeadLetterSerializer

    @extend_schema(responses={204: None, **errors(409)})
    def delete(self, request: Request, pk: str) -> Response:
        dead_letter_discard(dead_letter=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeadLetterReplay(InQueue, generics.GenericAPIView):
    serializer_class = DeadLetterSerializer
    consumer_allowed = True

    def get_queryset(self) -> QuerySet[DeadLetter]:
        return super().get_queryset().select_related("endpoint")

    @extend_schema(
        request=None,
        responses={202: DeadLetterSerializer, **errors(409, 429)},
        parameters=[RETRY_AFTER],
        operation_id="dead_letter_replay",
        description="Reads no request body (one sent is ignored).",
    )
    def post(self, request: Request, pk: str) -> Response:
        letter = self.get_object()
        dead_letter_replay(dead_letter=letter)
        letter.refresh_from_db()
        return Response(DeadLetterSerializer(letter).data, status=status.HTTP_202_ACCEPTED)


def _criteria(request: Request) -> dict[str, Any]:
    selection = BulkSelectionSerializer(data=request.data)
    selection.is_valid(raise_exception=True)
    return scope_of(request).criteria(**selection.validated_data)


class DeadLetterBulkReplay(InQueue, generics.GenericAPIView):
    serializer_class = BulkSelectionSerializer
    consumer_allowed = True

    @extend_schema(
        responses={202: ReplayedSerializer, **errors(429)},
        parameters=[RETRY_AFTER],
        operation_id="dead_letters_replay",
    )
    def post(self, request: Request) -> Response:
        # Answers at once with the count; the replay itself runs in background batches.
        job = replay_job_create(criteria=_criteria(request))
        return Response({"replayed": job.total}, status=status.HTTP_202_ACCEPTED)


class DeadLetterBulkDiscard(InQueue, generics.GenericAPIView):
    serializer_class = BulkSelectionSerializer

    @extend_schema(responses={200: DiscardedSerializer}, operation_id="dead_letters_discard")
    def post(self, request: Request) -> Response:
        discarded = dead_letters_discard(criteria=_criteria(request))
        return Response({"discarded": discarded}, status=status.HTTP_200_OK)


class EndpointRecover(TenantScoped, generics.GenericAPIView):
    """Replay every dead delivery of the endpoint that died between `since` and `until`
    (default: now), in the background as a bulk replay."""

    model = Endpoint
    serializer_class = RecoverSerializer
    consumer_allowed = True

    @extend_schema(
        responses={202: ReplayedSerializer, **errors(409, 429)}, parameters=[RETRY_AFTER]
    )
    def post(self, request: Request, pk: str) -> Response:
        endpoint = self.get_object()
        window = RecoverSerializer(data=request.data)
        window.is_valid(raise_exception=True)
        job = endpoint_recover(
            endpoint=endpoint, criteria=scope_of(request).criteria(), **window.validated_data
        )
        return Response({"replayed": job.total}, status=status.HTTP_202_ACCEPTED)


class EndpointStats(TenantScoped, generics.GenericAPIView):
    """The endpoint's attempts by outcome, success rate, p50/p95 attempt duration,
    deliveries finished and dead letters over a period, with per-interval buckets (1h:
    minutes, 24h: quarter hours, 7d: hours), from the per-minute figures."""

    model = Endpoint
    serializer_class = EndpointStatsSerializer
    consumer_allowed = True

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "period",
                str,
                OpenApiParameter.QUERY,
                enum=list(STATS_PERIODS),
                default="24h",
                allow_blank=True,  # `?period=` is the default, as a browser form sends it
                description="The period: 1h (buckets of a minute), 24h (15 min), 7d (1 h).",
            )
        ],
        responses={200: EndpointStatsSerializer},
    )
    def get(self, request: Request, pk: str) -> Response:
        endpoint = self.get_object()
        query = StatsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        stats = endpoint_stats(endpoint=endpoint, period=query.validated_data["period"])
        return Response(EndpointStatsSerializer(stats).data)
