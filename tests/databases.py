"""Which database the suite runs against: PostgreSQL (`make test`), or SQLite for the
claims' second pass (the embedded set-up's twin statements, tests/harness.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

ON_SQLITE = os.environ.get("DATABASE_URL", "").startswith("sqlite")

# Tests of what only PostgreSQL has (its plans, its row locks, its statements' text).
postgresql_only = pytest.mark.skipif(ON_SQLITE, reason="PostgreSQL only")


@contextmanager
def statements_run() -> Iterator[list[str]]:
    """The text of each statement run on the default connection meanwhile, as written
    (before the driver binds its parameters): to check it is a module's constant."""
    ran: list[str] = []

    def capture(execute, sql, params, many, context):
        if "clock_timestamp()" not in sql:  # core/clock.py's offset, measured now and then
            ran.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        yield ran
