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


def test_the_quickest_round_trip_sets_the_offset(db, monkeypatch):
    # The first round trip is slowed after the server answered (a loaded machine ran
    # something else): its middle is 0.2 s late. Alone, it put every due time 0.2 s in
    # the future, and a claim right after an ingest found nothing due.
    real, readings = time.time, iter(range(1_000_000))
    monkeypatch.setattr(clock.time, "time", lambda: real() + (0.4 if next(readings) == 1 else 0))
    offset = clock._measure()
    assert offset is not None and abs(offset) < 0.1
