from __future__ import annotations

from typing import Any

from rest_framework import serializers

from webhooks.models import ConsumerKey, Endpoint, Event


class StrictCharField(serializers.CharField):
    """A string, and only a string: DRF would turn 5 into "5"."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        return super().to_internal_value(data)


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
    owner = StrictCharField(allow_null=True, required=False, trim_whitespace=False, max_length=255)

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
            "owner",
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


class EventBatchSerializer(serializers.Serializer):
    events = EventSerializer(many=True)


class ConsumerKeyCreateSerializer(serializers.Serializer):
    owner = StrictCharField(trim_whitespace=False, max_length=255)
    description = serializers.CharField(required=False, allow_blank=True, max_length=500)


class ConsumerKeySerializer(serializers.ModelSerializer):
    """A consumer key as lists show it: never the key itself (only its first characters)."""

    class Meta:
        model = ConsumerKey
        fields = ["id", "owner", "description", "prefix", "created_at"]


class ConsumerKeyWithKeySerializer(ConsumerKeySerializer):
    """The answer to POST /consumer-keys: the one time the key is shown."""

    key = serializers.CharField(read_only=True)

    class Meta(ConsumerKeySerializer.Meta):
        fields = [*ConsumerKeySerializer.Meta.fields, "key"]
