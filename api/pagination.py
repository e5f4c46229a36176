from __future__ import annotations

from rest_framework.pagination import CursorPagination


class NewestFirstPagination(CursorPagination):
    """Stable pages under concurrent inserts: a cursor, not an offset."""

    ordering = "-created_at"
    page_size_query_param = "limit"
    max_page_size = 250
