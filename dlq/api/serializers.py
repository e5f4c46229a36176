from __future__ import annotations

from typing import Any

from rest_framework import serializers

from api.fields import StrictCharField
from dlq.models import DeadLetter
from dlq.selectors import STATS_PERIODS


class DeadLetterSerializer(serializers.ModelSerializer):
    delivery_id = serializers.CharField(read_only=True)
    event_id = serializers.CharField(read_only=True)
    endpoint_id = serializers.CharField(read_only=True)

    class Meta:
        model = DeadLetter
        fields = [
            "id",
            "delivery_id",
            "event_id",
            "endpoint_id",
            "event_type",
            "reason",
            "dead_at",
            "replayed_at",
        ]


class BulkSelectionSerializer(serializers.Serializer):
    # min_length: "" is refused (blank), and the schema says so.
    ids = serializers.ListField(
        child=StrictCharField(min_length=1, max_length=40), required=False, max_length=1000
    )
    endpoint = StrictCharField(required=False, min_length=1, max_length=40)
    event_type = StrictCharField(required=False, min_length=1, max_length=255)


class ReplayedSerializer(serializers.Serializer):
    replayed = serializers.IntegerField()


class DiscardedSerializer(serializers.Serializer):
    discarded = serializers.IntegerField()


class RecoverSerializer(serializers.Serializer):
    """`POST /endpoints/{id}/recover`: the window the dead deliveries died in."""

    since = serializers.DateTimeField()
    until = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "until" in attrs and attrs["until"] < attrs["since"]:
            raise serializers.ValidationError({"until": ["Must not be before since."]})
        return attrs


class StatsQuerySerializer(serializers.Serializer):
    """`?period=` of GET /endpoints/{id}/stats."""

    period = serializers.ChoiceField(choices=list(STATS_PERIODS), default="24h")


class StatsOutcomesSerializer(serializers.Serializer):
    success = serializers.IntegerField()
    retryable = serializers.IntegerField()
    fatal = serializers.IntegerField()


class StatsBucketSerializer(StatsOutcomesSerializer):
    start = serializers.DateTimeField()


class StatsDurationSerializer(serializers.Serializer):
    p50 = serializers.IntegerField(allow_null=True)
    p95 = serializers.IntegerField(allow_null=True)


class StatsDeliveriesSerializer(serializers.Serializer):
    """Every public status. pending and delivering: the endpoint's deliveries in that
    status now (exact up to 10,000, past that PostgreSQL's estimate); succeeded and dead:
    the deliveries that finished so in the period."""

    pending = serializers.IntegerField(help_text="Waiting for an attempt, now.")
    delivering = serializers.IntegerField(help_text="An attempt in flight, now.")
    succeeded = serializers.IntegerField(help_text="Succeeded in the period.")
    dead = serializers.IntegerField(help_text="Died in the period (a dead letter written).")


class EndpointStatsSerializer(serializers.Serializer):
    """dlq.selectors.EndpointStats: figures from the per-minute attempt table."""

    period = serializers.ChoiceField(choices=list(STATS_PERIODS))
    attempts = StatsOutcomesSerializer()
    success_rate = serializers.FloatField(allow_null=True)
    duration_ms = StatsDurationSerializer()
    deliveries = StatsDeliveriesSerializer()
    dead_letters = serializers.IntegerField()
    buckets = StatsBucketSerializer(many=True)
