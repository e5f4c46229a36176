from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from rest_framework import serializers

from core.network import resolve_blocked_reason
from webhooks.models import Endpoint, Event

EVENT_TYPE = re.compile(r"^[A-Za-z0-9_\-:/]+(\.[A-Za-z0-9_\-:/]+)*$")
EVENT_TYPE_PATTERN = re.compile(r"^(\*|[A-Za-z0-9_\-:/]+(\.[A-Za-z0-9_\-:/]+)*(\.\*)?)$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]{1,100}$")
# Headers Homing sets itself: a user value would break signing or HTTP framing.
RESERVED_HEADERS = {
    "content-type",
    "user-agent",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
}
MAX_CUSTOM_HEADERS = 20


def validate_endpoint_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise serializers.ValidationError("Only http and https URLs are accepted.")
    if not parts.hostname:
        raise serializers.ValidationError("The URL has no host.")
    if parts.username or parts.password:
        raise serializers.ValidationError("Put credentials in `headers`, not in the URL.")
    if not settings.HOMING_ALLOW_PRIVATE_NETWORKS:
        reason = resolve_blocked_reason(parts.hostname)
        if reason:
            raise serializers.ValidationError(
                f"{reason}; private, loopback and link-local addresses are refused "
                "(set HOMING_ALLOW_PRIVATE_NETWORKS=true to allow them)."
            )
    return url


class EndpointSerializer(serializers.ModelSerializer):
    url = serializers.URLField(max_length=2048)
    event_types = serializers.ListField(
        child=serializers.CharField(max_length=255), required=False, max_length=100
    )
    rate_limit = serializers.IntegerField(
        min_value=1, max_value=100_000, allow_null=True, required=False
    )
    headers = serializers.DictField(child=serializers.CharField(max_length=4096), required=False)

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
            "secret",
            "created_at",
        ]
        read_only_fields = ["id", "secret", "created_at"]

    def validate_url(self, url: str) -> str:
        return validate_endpoint_url(url)

    def validate_event_types(self, event_types: list[str]) -> list[str]:
        for pattern in event_types:
            if not EVENT_TYPE_PATTERN.match(pattern):
                raise serializers.ValidationError(
                    f"{pattern!r} is not an event type or a `prefix.*` pattern."
                )
        return list(dict.fromkeys(event_types))  # drop repeats, keep order

    def validate_headers(self, headers: dict[str, str]) -> dict[str, str]:
        if len(headers) > MAX_CUSTOM_HEADERS:
            raise serializers.ValidationError(f"At most {MAX_CUSTOM_HEADERS} headers.")
        for name, value in headers.items():
            if not HEADER_NAME.match(name):
                raise serializers.ValidationError(f"{name!r} is not a valid header name.")
            lowered = name.lower()
            if lowered in RESERVED_HEADERS or lowered.startswith("webhook-"):
                raise serializers.ValidationError(
                    f"{name!r} is set by Homing and cannot be overridden."
                )
            if "\r" in value or "\n" in value:
                raise serializers.ValidationError(f"The value of {name!r} contains a line break.")
        return headers


class SecretSerializer(serializers.Serializer):
    secret = serializers.CharField(read_only=True)


class TestEventSerializer(serializers.Serializer):
    event_id = serializers.CharField(read_only=True)
    delivery_id = serializers.CharField(read_only=True)


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
