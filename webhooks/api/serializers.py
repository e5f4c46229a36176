from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from webhooks.models import Endpoint, Event

EVENT_TYPE = re.compile(r"^[A-Za-z0-9_\-:/]+(\.[A-Za-z0-9_\-:/]+)*$")


class EndpointSerializer(serializers.ModelSerializer):
    """Shapes an endpoint; the rules for its fields live in webhooks.services.endpoint_rules
    (shared with the admin), so this only checks JSON types. It never carries the secret."""

    url = serializers.CharField(trim_whitespace=False)
    event_types = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False), required=False
    )
    rate_limit = serializers.IntegerField(allow_null=True, required=False)
    headers = serializers.DictField(
        child=serializers.CharField(trim_whitespace=False, allow_blank=True), required=False
    )

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "url",
            "description",
            "event_types",
            "rate_limit",
            "headers",
            "is_active",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]


class EndpointWithSecretSerializer(EndpointSerializer):
    """The answer to POST /endpoints: the only endpoint body that carries the secret."""

    secret = serializers.CharField(read_only=True)

    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret"]


class SecretSerializer(serializers.Serializer):
    secret = serializers.CharField(read_only=True)


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of converting them."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class EventCreateSerializer(serializers.Serializer):
    type = StrictCharField(max_length=255)
    data = serializers.JSONField()

    def validate_type(self, value: str) -> str:
        if not EVENT_TYPE.match(value):
            raise serializers.ValidationError(
                "Use letters, digits, `_-:/` and dots, e.g. `invoice.paid`."
            )
        return value

    def validate_data(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return value


class EventDeliverySerializer(serializers.Serializer):
    id = serializers.CharField()
    endpoint_id = serializers.CharField()
    status = serializers.CharField()


class EventSerializer(serializers.ModelSerializer):
    deliveries = EventDeliverySerializer(many=True, read_only=True)

    class Meta:
        model = Event
        fields = ["id", "type", "data", "created_at", "deliveries"]


class EventSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "type", "data", "created_at"]
