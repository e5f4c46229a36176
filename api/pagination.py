"""Keyset pagination on (time, id), newest first.

DRF's CursorPagination keeps only the time in its cursor and steps over equal times with
an offset capped at 1,000: a deactivation that writes 5,000 dead letters with one
`dead_at` made `next` loop or stop early. Here the cursor is the last item's
(time, id) pair — ids are unique — so every page starts strictly after the previous
one: each item is seen once and the walk ends, however many items share a time.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param


class NewestFirstPagination(BasePagination):
    ordering = "-created_at"  # the time field, newest first; `id` breaks ties
    cursor_query_param = "cursor"
    page_size_query_param = "limit"
    page_size = 50
    max_page_size = 250

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: Any = None
    ) -> list[Any]:
        self.request = request
        field = self.ordering.lstrip("-")
        size = self._page_size(request)
        position = self._decode(request.query_params.get(self.cursor_query_param))
        items = queryset.order_by(f"-{field}", "-id")
        if position is not None:
            time, last_id = position
            items = items.filter(
                Q(**{f"{field}__lt": time}) | Q(**{field: time, "id__lt": last_id})
            )
        page = list(items[: size + 1])
        self.has_next = len(page) > size
        page = page[:size]
        self.next_position = (getattr(page[-1], field), page[-1].id) if self.has_next else None
        return page

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"results": data, "next": self.get_next_link()})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {
                "results": schema,
                "next": {"type": "string", "nullable": True, "format": "uri"},
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "in": "query",
                "required": False,
                "description": "The `next` link's cursor (opaque).",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "in": "query",
                "required": False,
                "description": f"Items per page, at most {self.max_page_size}.",
                "schema": {"type": "integer", "minimum": 1},
            },
        ]

    def get_next_link(self) -> str | None:
        if self.next_position is None:
            return None
        time, last_id = self.next_position
        raw = json.dumps([time.isoformat(), last_id]).encode()
        token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return replace_query_param(
            self.request.build_absolute_uri(), self.cursor_query_param, token
        )

    def _page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not raw.isdigit() or int(raw) < 1:
            raise ValidationError({"limit": ["Must be a whole number from 1."]})
        return min(int(raw), self.max_page_size)

    def _decode(self, token: str | None) -> tuple[datetime, str] | None:
        """The (time, id) a cursor carries; a cursor that was tampered with is a 400."""
        if token is None:
            return None
        try:
            time_text, last_id = json.loads(
                base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            )
            time = parse_datetime(time_text)
            if time is None or time.tzinfo is None or not isinstance(last_id, str):
                raise ValueError("not a (time, id) pair")
            if not last_id.isprintable() or len(last_id) > 64:  # PostgreSQL refuses NUL
                raise ValueError("not a (time, id) pair")
        except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
            raise ValidationError({"cursor": ["Invalid cursor."]}) from None
        return time, last_id
