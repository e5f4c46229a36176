"""Serializer fields shared by the API's serializers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

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
