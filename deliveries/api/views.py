from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import QueryFilter, QueryFilters, event_type_filter, id_filter
from api.schema import NO_BODY, RETRY_AFTER, RETRY_AFTER_IF_GIVEN, errors, unreadable_error
from deliveries.api.serializers import (
    DeliverySerializer,
    EventBatchCreateSerializer,
    EventBatchSerializer,
    EventCreateSerializer,
    EventSerializer,
    EventSummarySerializer,
    FeedExpiredSerializer,
    FeedPageSerializer,
    FeedQuerySerializer,
    FilterTestResultSerializer,
    FilterTestSerializer,
    TestEventSerializer,
)
from deliveries.intake import api as intake
from deliveries.intake import retries
from deliveries.intake.filter_trial import filter_try
from deliveries.intake.ingest import endpoint_send_test
from deliveries.models import Delivery
from deliveries.selectors import endpoint_messages
from deliveries.statuses import public_status
from webhooks.api.scoping import TenantScoped, scope_of
from webhooks.models import Endpoint, Event

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "pattern": f"^{intake.IDEMPOTENCY_KEY.pattern}$"},
    OpenApiParameter.HEADER,
    description="Replays the first answer, byte for byte, for HOMING_IDEMPOTENCY_TTL",
)
# What POST /events and POST /events/batch answer besides 202 and 400.
INTAKE_ERRORS = errors(409, 422, 429, 503)
INTAKE_PARAMETERS = [IDEMPOTENCY_PARAMETER, RETRY_AFTER, RETRY_AFTER_IF_GIVEN]


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
        responses={202: DeliverySerializer, **errors(409, 429)},
        parameters=[RETRY_AFTER],
        description="One more attempt now, whatever the status. Reads no request body.",
    )
    def post(self, request: Request, pk: str) -> Response:
        delivery = retries.delivery_retry(delivery=self.get_object())
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


class EndpointSendTest(TenantScoped, generics.GenericAPIView):
    model = Endpoint
    serializer_class = TestEventSerializer
    consumer_allowed = True

    @extend_schema(
        request=None,
        responses={202: TestEventSerializer, **errors(409, 429)},
        parameters=[RETRY_AFTER],
        description=NO_BODY,
    )
    def post(self, request: Request, pk: str) -> Response:
        event, delivery = endpoint_send_test(endpoint=self.get_object())
        return Response(
            {"event_id": event.id, "delivery_id": delivery.id}, status=status.HTTP_202_ACCEPTED
        )


class EndpointFilterTest(TenantScoped, generics.GenericAPIView):
    """Whether a filter (the endpoint's own, or one being written) matches an event (one
    given whole, or an earlier one by id), and which clause failed if not. Nothing is
    written or sent."""

    model = Endpoint
    serializer_class = FilterTestSerializer
    consumer_allowed = True

    @extend_schema(
        request=FilterTestSerializer,
        responses={200: FilterTestResultSerializer, **unreadable_error()},
    )
    def post(self, request: Request, pk: str) -> Response:
        incoming = FilterTestSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        matches, explanation = filter_try(
            scope=scope_of(request), endpoint=self.get_object(), body=request.data
        )
        return Response({"matches": matches, "explanation": explanation})


class EventList(TenantScoped, generics.ListAPIView):
    model = Event
    serializer_class = EventSummarySerializer
    filter_backends = [QueryFilters]
    query_filters = [event_type_filter("type", "type")]
    page_weight_field = "data"  # a page stops short of MAX_PAGE_BYTES of event data
    reads_any_content_type = True  # POST is intake's: no 415 (api.schema)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponse]:  # type: ignore[override]  # POST skips DRF
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
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponse]:  # type: ignore[override]  # POST skips DRF
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
