from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from api.fields import BlankAsNullField
from deliveries.models import Attempt, Delivery
from deliveries.selectors import FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT
from deliveries.statuses import public_status
from webhooks.api.serializers import FilterField
from webhooks.models import Event
from webhooks.services.event_input import EVENT_TYPE


class AttemptSerializer(serializers.ModelSerializer):
    error = BlankAsNullField()

    class Meta:
        model = Attempt
        fields = ["number", "started_at", "duration_ms", "status_code", "error", "response_body"]


class DeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.CharField(read_only=True)
    endpoint_id = serializers.CharField(read_only=True)
    status = serializers.SerializerMethodField()
    attempts = AttemptSerializer(many=True, read_only=True)
    last_error = BlankAsNullField()

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event_id",
            "endpoint_id",
            "sequence",
            "status",
            "attempt_count",
            "next_attempt_at",
            "blocked_by",
            "last_error",
            "attempts",
        ]

    def get_status(self, delivery: Delivery) -> str:
        return public_status(delivery.status)


class FeedQuerySerializer(serializers.Serializer):
    """`?after=&limit=` of the catch-up feed."""

    after = serializers.IntegerField(min_value=0, max_value=2**62, default=0)
    limit = serializers.IntegerField(
        min_value=1, max_value=FEED_MAX_LIMIT, default=FEED_DEFAULT_LIMIT
    )


class FeedMessageSerializer(serializers.Serializer):
    sequence = serializers.IntegerField()
    event_id = serializers.CharField()
    type = serializers.CharField()
    created_at = serializers.DateTimeField()
    ordering_key = serializers.CharField(allow_null=True)
    data = serializers.JSONField()  # type: ignore[assignment]  # a declared field, not Serializer.data
    delivery_id = serializers.CharField()
    status = serializers.ChoiceField(choices=Delivery.Status.choices)


class FeedPageSerializer(serializers.Serializer):
    results = FeedMessageSerializer(many=True, source="messages")
    next_after = serializers.IntegerField()
    done = serializers.BooleanField()


class FeedExpiredSerializer(serializers.Serializer):
    message = serializers.CharField()
    oldest_sequence = serializers.IntegerField()


class TestEventSerializer(serializers.Serializer):
    event_id = serializers.CharField(read_only=True)
    delivery_id = serializers.CharField(read_only=True)


class EventCreateSerializer(serializers.Serializer):
    """The body of POST /events, for the OpenAPI schema only.

    Validation lives in `webhooks.services.event_input`, shared by every entry point.
    """

    type = serializers.RegexField(f"^{EVENT_TYPE.pattern}$", max_length=255)
    data = serializers.DictField()  # type: ignore[assignment]  # a declared field, not Serializer.data
    ordering_key = serializers.RegexField(
        r"^[^\x00-\x1f\x7f-\x9f]{1,255}$", required=False, allow_null=True, max_length=255
    )
    # The producer's W3C trace context for this event (core/tracing.py); a batch item's
    # own wins over the request's `traceparent` header.
    traceparent = serializers.RegexField(
        r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
        required=False,
        allow_null=True,
        help_text="W3C traceparent of the producer's span for this event.",
    )
    tracestate = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=512,
        help_text="W3C tracestate, kept with traceparent (dropped when over 512 characters).",
    )


class EventBatchCreateSerializer(serializers.Serializer):
    """The body of POST /events/batch, for the OpenAPI schema only."""

    events = serializers.ListField(
        child=EventCreateSerializer(), min_length=1, max_length=settings.HOMING_MAX_BATCH_EVENTS
    )


class EventDeliverySerializer(serializers.Serializer):
    id = serializers.CharField()
    endpoint_id = serializers.CharField()
    sequence = serializers.IntegerField()
    status = serializers.SerializerMethodField()

    def get_status(self, delivery: Any) -> str:
        return public_status(delivery.status)


class EventSerializer(serializers.ModelSerializer):
    deliveries = EventDeliverySerializer(many=True, read_only=True)

    class Meta:
        model = Event
        fields = ["id", "type", "data", "ordering_key", "created_at", "deliveries"]


class EventSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "type", "data", "ordering_key", "created_at"]


class EventBatchSerializer(serializers.Serializer):
    events = EventSerializer(many=True)


class FilterTestSerializer(serializers.Serializer):
    """The body of POST /endpoints/{id}/filter-test (checked by intake.filter_trial)."""

    filter = FilterField(
        allow_null=True,
        required=False,
        help_text="The filter to try; without it, the endpoint's own.",
    )
    event = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="An event as POST /events takes it: {type, data, ordering_key?}.",
    )
    event_id = serializers.CharField(
        required=False, allow_null=True, max_length=64, help_text="An earlier event of yours."
    )


class FilterTestResultSerializer(serializers.Serializer):
    matches = serializers.BooleanField(read_only=True)
    explanation = serializers.CharField(
        read_only=True, help_text="Which clauses failed (or that every clause matched)."
    )
