from __future__ import annotations

from rest_framework import serializers

from api.fields import BlankAsNullField
from deliveries.models import Attempt, Delivery


class AttemptSerializer(serializers.ModelSerializer):
    error = BlankAsNullField()

    class Meta:
        model = Attempt
        fields = ["number", "started_at", "duration_ms", "status_code", "error", "response_body"]


class DeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.CharField(read_only=True)
    endpoint_id = serializers.CharField(read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)
    last_error = BlankAsNullField()

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event_id",
            "endpoint_id",
            "status",
            "attempt_count",
            "next_attempt_at",
            "last_error",
            "attempts",
        ]
