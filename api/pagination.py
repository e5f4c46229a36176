"""Keyset pagination on (time, id), newest first.

DRF's CursorPagination keeps only the time in its cursor and steps over equal times with
an offset capped at 1,000: a deactivation that writes 5,000 dead letters with one
`dead_at` made `next` loop or stop early. Here the cursor is the last item's
(time, id) pair — ids are unique — so every page starts strictly after the previous
one: each item is seen once and the walk ends, however many items share a time.

A page is bounded by bytes as well as rows: a view naming a `page_weight_field` (events'
`data`, up to HOMING_MAX_PAYLOAD_BYTES each) gets pages that stop once that field's
sizes add up to MAX_PAGE_BYTES, with `next` for the rest — 250 events of 256 KiB were
62 MB to load, parse and render in one request.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast, Length
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

# A cursor is base64url (unpadded) of a short JSON pair: anything else was tampered with.
CURSOR_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,200}")
# A page stops adding rows once their weighed field reaches this (a row is never split:
# one row over it still makes a page on its own).
MAX_PAGE_BYTES = 4 * 1024 * 1024


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
        weight_field = getattr(view, "page_weight_field", None)
        if weight_field is not None:
            return self._page_within_bytes(items, field, weight_field, size)
        page = list(items[: size + 1])
        self.has_next = len(page) > size
        page = page[:size]
        self.next_position = (getattr(page[-1], field), page[-1].id) if self.has_next else None
        return page

    def _page_within_bytes(
        self, items: QuerySet[Any], field: str, weight_field: str, size: int
    ) -> list[Any]:
        """Up to `size` rows whose `weight_field` adds up to at most MAX_PAGE_BYTES: their
        sizes are read first (the database measures, nothing heavy reaches Python), then
        only the rows that fit are loaded."""
        weighed = items.annotate(_bytes=Length(Cast(weight_field, TextField())))
        rows = list(weighed.values_list("id", field, "_bytes")[: size + 1])
        kept: list[tuple[Any, Any]] = []  # (id, position)
        total = 0
        for row_id, time, row_bytes in rows[:size]:
            total += row_bytes or 0
            if kept and total > MAX_PAGE_BYTES:
                break
            kept.append((row_id, time))
        self.has_next = len(kept) < len(rows)
        self.next_position = (kept[-1][1], kept[-1][0]) if self.has_next else None
        return list(items.filter(id__in=[row_id for row_id, _ in kept]))

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
                "allowEmptyValue": True,  # `?cursor=` is the first page
                "description": "Where the page starts: the cursor of a `next` link (opaque).",
                "schema": {"type": "string", "pattern": f"^{CURSOR_PATTERN.pattern}$"},
            },
            {
                "name": self.page_size_query_param,
                "in": "query",
                "required": False,
                "description": (
                    f"Items per page (default {self.page_size}); a page of large items "
                    "holds fewer, with `next` for the rest."
                ),
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
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
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses (a 500).
        if not re.fullmatch(r"[0-9]{1,9}", raw) or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError(
                {"limit": [f"Must be a whole number from 1 to {self.max_page_size}."]}
            )
        return int(raw)

    def _decode(self, token: str | None) -> tuple[datetime, str] | None:
        """The (time, id) a cursor carries; a cursor that was tampered with is a 400."""
        if not token:
            return None  # `?cursor=`: the first page
        try:
            if not CURSOR_PATTERN.fullmatch(token):
                raise ValueError("not base64url")
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
