"""Serializer fields shared by the API's serializers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

if TYPE_CHECKING:  # a dev dependency (the stubs' helpers): never imported at run time
    from django_stubs_ext import StrOrPromise


class BlankAsNullField(serializers.CharField):
    """An optional message stored as '' (CharField), shown as null when there is none."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value: str) -> str | None:  # type: ignore[override]  # None is the point
        return value or None


class StrictJsonTypeMixin(serializers.Field):
    """Takes only the JSON type the schema states: DRF's fields also take `"5"` for 5,
    `"yes"` for true and 5 for "5", so a request the schema calls invalid was accepted."""

    json_types: tuple[type, ...] = ()
    default_error_messages: ClassVar[dict[str, StrOrPromise]] = {
        "json_type": "Must be a JSON {name}."
    }
    json_name = ""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) is not (bool in self.json_types) or not isinstance(
            data, self.json_types
        ):
            self.fail("json_type", name=self.json_name)
        # Placed before a DRF field: this is that field's own conversion.
        return super().to_internal_value(data)


class StrictCharField(StrictJsonTypeMixin, serializers.CharField):
    json_types = (str,)
    json_name = "string"


class StrictIntegerField(StrictJsonTypeMixin, serializers.IntegerField):
    json_types = (int,)
    json_name = "integer"


class StrictBooleanField(StrictJsonTypeMixin, serializers.BooleanField):
    json_types = (bool,)
    json_name = "boolean (true or false)"


# An owner is 1 to 255 printable characters (webhooks' endpoint_owner_check refuses the
# rest); the schema states the control characters among them, as the `?owner=` filter
# does, and that "" is refused.
OWNER_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]+$"


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": 255, "pattern": OWNER_PATTERN})
class OwnerField(StrictCharField):
    """An endpoint's `owner`: the tenant's name for one of its customers."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, min_length=1, max_length=255, **kwargs)
