"""Query-string filters of the list routes: one declaration checks, filters and documents.

Each view lists its `query_filters`; the same `QueryFilter` refuses a bad value with a 400
naming the parameter (a NUL byte reached PostgreSQL and was a 500), narrows the queryset,
and describes the parameter in the OpenAPI schema — so the schema states exactly the
limits the API enforces. An empty value is the same as leaving the parameter out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from rest_framework.filters import BaseFilterBackend
from rest_framework.request import Request

from core.exceptions import InvalidInput
from core.ids import ID_LENGTH

EVENT_TYPE_PATTERN = r"[A-Za-z0-9_.:\-]{1,255}"  # as webhooks.services.event_input checks
ID_PATTERN = rf"[A-Za-z0-9_]{{1,{ID_LENGTH}}}"  # what core.ids makes, and a little more


@dataclass(frozen=True)
class QueryFilter:
    """`?name=value` keeps the rows whose `field` equals the value (or `choices[value]`)."""

    name: str
    field: str
    description: str
    pattern: str | None = None  # the whole value must match
    choices: dict[str, Any] | None = None  # accepted values -> what the field must equal

    def value(self, raw: str) -> Any:
        if self.choices is not None:
            if raw not in self.choices:
                raise InvalidInput(self.name, f"Use one of: {', '.join(self.choices)}.")
            return self.choices[raw]
        if self.pattern is not None and not re.fullmatch(self.pattern, raw):
            raise InvalidInput(self.name, f"Must match {self.pattern}.")
        return raw

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if self.choices is not None:
            schema["enum"] = list(self.choices)
        elif self.pattern is not None:
            schema["pattern"] = f"^{self.pattern}$"
        return {
            "name": self.name,
            "in": "query",
            "required": False,
            "allowEmptyValue": True,  # `?status=` is no filter, as a browser form sends it
            "description": self.description,
            "schema": schema,
        }


def id_filter(name: str, field: str, what: str) -> QueryFilter:
    return QueryFilter(name, field, f"Only those of this {what} (its id).", pattern=ID_PATTERN)


def event_type_filter(name: str, field: str) -> QueryFilter:
    return QueryFilter(name, field, "Only this event type.", pattern=EVENT_TYPE_PATTERN)


def query_values(request: Request, specs: Sequence[QueryFilter]) -> dict[str, Any]:
    """The checked value of each filter the request gives, keyed by the filter's `field`."""
    values = {}
    for spec in specs:
        raw = request.query_params.get(spec.name)
        if raw:
            values[spec.field] = spec.value(raw)
    return values


class QueryParameters(BaseFilterBackend):
    """Documents the view's `query_filters`; the view's selector applies them (it reads
    `query_values`)."""

    def filter_queryset(
        self, request: Request, queryset: QuerySet[Any], view: Any
    ) -> QuerySet[Any]:
        return queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [spec.openapi() for spec in getattr(view, "query_filters", ())]


class QueryFilters(QueryParameters):
    """Applies the view's `query_filters`; a bad value is a 400 naming the parameter."""

    def filter_queryset(
        self, request: Request, queryset: QuerySet[Any], view: Any
    ) -> QuerySet[Any]:
        return queryset.filter(**query_values(request, getattr(view, "query_filters", ())))
