from __future__ import annotations

from typing import Any

from rest_framework import serializers

from deliveries.statuses import public_status
from webhooks.models import Endpoint, Event
from webhooks.services.endpoints import headers_decrypted


class PlainHeadersField(serializers.DictField):
    """Header values are stored encrypted; the tenant reads and writes them plain."""

    def to_representation(self, value: dict[str, str]) -> dict[str, str]:
        return super().to_representation(headers_decrypted(value))


class EndpointSerializer(serializers.ModelSerializer):
    """Shapes an endpoint; the rules for its fields live in webhooks.services.endpoint_rules
    (shared with the admin), so this only checks JSON types. It never carries the secret."""

    url = serializers.CharField(trim_whitespace=False)
    event_types = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False), required=False
    )
    rate_limit = serializers.IntegerField(allow_null=True, required=False)
    headers = PlainHeadersField(
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
            "circuit_state",
            "consecutive_failures",
            "failing_since",
            "disabled_reason",
            "created_at",
        ]
        read_only_fields = [
            "id",
            "circuit_state",
            "consecutive_failures",
            "failing_since",
            "disabled_reason",
            "created_at",
        ]


class EndpointWithSecretSerializer(EndpointSerializer):
    """The answer to POST /endpoints: the only endpoint body that carries the secret."""

    secret = serializers.CharField(read_only=True)

    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret"]


class SecretSerializer(serializers.Serializer):
    secret = serializers.CharField(read_only=True)


class TestEventSerializer(serializers.Serializer):
    event_id = serializers.CharField(read_only=True)
    delivery_id = serializers.CharField(read_only=True)


class EventCreateSerializer(serializers.Serializer):
    """The body of POST /events, for the OpenAPI schema only.

    Validation lives in `webhooks.services.event_input`, shared by every entry point.
    """

    type = serializers.RegexField(r"^[A-Za-z0-9_.:\-]{1,255}$", max_length=255)
    data = serializers.DictField()


class EventBatchCreateSerializer(serializers.Serializer):
    """The body of POST /events/batch, for the OpenAPI schema only."""

    events = EventCreateSerializer(many=True)


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
