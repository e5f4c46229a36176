"""core.clock: this process's clock corrected to the database's."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from django.db import connection

from core import clock


@pytest.fixture
def ten_minutes_ahead(monkeypatch):
    real = time.time
    monkeypatch.setattr(clock.time, "time", lambda: real() + 600)
    monkeypatch.setattr(clock, "_measured_at", None)  # measure afresh
    yield
    monkeypatch.setattr(clock, "_measured_at", None)


def database_clock() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def test_a_clock_ten_minutes_ahead_reads_the_databases_time(db, ten_minutes_ahead):
    assert abs(clock.database_offset() + 600) < 1
    assert abs((clock.database_now() - database_clock()).total_seconds()) < 1
    assert abs(clock.database_time() - database_clock().timestamp()) < 1


def test_the_offset_is_measured_at_most_every_refresh_interval(db, ten_minutes_ahead):
    clock.database_offset()
    with CountQueries() as counted:
        for _ in range(100):
            clock.database_now()
    assert counted.n == 0


class CountQueries:
    def __enter__(self):
        self.n = 0
        self._wrapper = connection.execute_wrapper(self._count)
        self._wrapper.__enter__()
        return self

    def __exit__(self, *exc):
        self._wrapper.__exit__(*exc)

    def _count(self, execute, sql, params, many, context):
        self.n += 1
        return execute(sql, params, many, context)
