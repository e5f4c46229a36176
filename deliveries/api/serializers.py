from __future__ import annotations

from rest_framework import serializers

from deliveries.models import Attempt, Delivery


class BlankAsNullField(serializers.CharField):
    """An optional message stored as '' (CharField), shown as null when there is none."""

    def to_representation(self, value: str) -> str | None:
        return value or None


class AttemptSerializer(serializers.ModelSerializer):
    error = BlankAsNullField(read_only=True, allow_null=True)

    class Meta:
        model = Attempt
        fields = ["number", "started_at", "duration_ms", "status_code", "error", "response_body"]


class DeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.CharField(read_only=True)
    endpoint_id = serializers.CharField(read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)
    last_error = BlankAsNullField(read_only=True, allow_null=True)

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
            "last_error",
            "attempts",
        ]
