"""A cursor whose statements PostgreSQL parses and plans once per connection.

Django binds parameters on the client (each statement reaches the server as new text to
parse and plan) and leaves psycopg's prepared statements off, for poolers that cannot
keep them. Ingestion's one statement is the same text for every request, and parsing and
planning it was a good part of PostgreSQL's CPU per event: it goes through this cursor,
prepared on each connection the first time it runs there (a pooler in transaction mode
must keep prepared statements, as PgBouncer does from 1.21 with
`max_prepared_statements`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper

PREPARE_THRESHOLD = 5  # psycopg's default; `_PreparedCursor` asks at the first execution


class _PreparedCursor(psycopg.Cursor):
    def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
        return super().execute(query, params, **{**options, "prepare": True})


def prepared_cursor() -> CursorWrapper:
    """Django's cursor (health check, error wrapping, query log) over a prepared one."""
    # `connection` is a proxy that looks the thread's connection up on every attribute
    # read (1.6 µs each): looked up once, this costs a third of what it did.
    db = connections[DEFAULT_DB_ALIAS]
    db.close_if_health_check_failed()
    db.ensure_connection()
    driver_connection = db.connection
    if driver_connection.prepare_threshold is None:
        # Django's None turns preparing off even when asked; Django's own (client-side
        # binding) cursors never prepare whatever the threshold.
        driver_connection.prepare_threshold = PREPARE_THRESHOLD
    raw = _PreparedCursor(driver_connection)
    if db.queries_logged:
        return db.make_debug_cursor(raw)  # type: ignore[arg-type]  # stubs: a driver cursor is right
    return db.make_cursor(raw)  # type: ignore[arg-type]  # (Django wraps psycopg's own)


def text_array(values: Iterable[str]) -> str:
    """`values` as one PostgreSQL text[] literal, to bind to a `%s::text[]` parameter.

    psycopg dumps a list parameter element by element in Python (17 µs for a
    single-event POST's five one-item lists, 110 µs for one list of 100 ids); a string
    is passed as it is. Every element is quoted, so none reads as NULL or is trimmed,
    and a backslash or a double quote in one is escaped: any text round-trips.
    """
    quoted = [value.replace("\\", "\\\\").replace('"', '\\"') for value in values]
    return '{"' + '","'.join(quoted) + '"}' if quoted else "{}"
