from __future__ import annotations

from datetime import timedelta
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import OwnerField, StrictBooleanField
from core.durations import parse_duration


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?$"},
            {"type": "number", "minimum": 1},
        ],
        "example": "1h",
    }
)
class DurationField(serializers.Field):
    """`30m`, `2h`, `7d` (units ms s m h d) or a number of seconds."""

    def to_internal_value(self, data: Any) -> timedelta:
        if isinstance(data, bool) or not isinstance(data, (int, float, str)):
            raise serializers.ValidationError("Must be a duration such as 30m, 2h or 7d.")
        try:
            seconds = parse_duration(str(data))
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None
        return timedelta(seconds=seconds)

    def to_representation(self, value: timedelta) -> str:
        return f"{int(value.total_seconds())}s"


class PortalSessionCreateSerializer(serializers.Serializer):
    owner = OwnerField()
    ttl = DurationField(required=False, help_text="At most 7d; default 1h.")
    read_only = StrictBooleanField(required=False, default=False)  # type: ignore[assignment]  # a declared field, not Field.read_only


class PortalLinkSerializer(serializers.Serializer):
    url = serializers.URLField()
    expires_at = serializers.DateTimeField()
