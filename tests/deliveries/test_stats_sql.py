"""The endpoint statistics' statement (deliveries/stats_sql.py) is written once, whole, and
pinned here; its SQLite twin runs the same tests in the SQLite pass (tests/harness.py)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from deliveries import stats_sql
from deliveries.models import EndpointMinute
from deliveries.selectors import endpoint_attempt_figures
from tests.databases import statements_run

PINNED = {
    "ENDPOINT_BUCKETS": "8eab1ae390f3cfb605c3c401a073c1dd6f666e4f77090794f9991a34dc46e6a3",
    "ENDPOINT_BUCKETS_SQLITE": "c889337c86f7252c2cd733f88805834cc15b69f440a2ced61e99251339237113",
}


def test_the_statements_are_the_pinned_text() -> None:
    assert set(PINNED) == {name for name in dir(stats_sql) if name.isupper()}
    for name, digest in PINNED.items():
        text = getattr(stats_sql, name)
        assert hashlib.sha256(text.encode()).hexdigest() == digest, f"{name} changed:\n{text}"


def test_the_twins_differ_only_in_reading_the_minute() -> None:
    assert (
        stats_sql.ENDPOINT_BUCKETS_SQLITE.replace(
            "CAST(strftime('%%s', minute) AS INTEGER)", "extract(epoch FROM minute)::bigint"
        ).split("SELECT", 1)[1]
        == stats_sql.ENDPOINT_BUCKETS.split("SELECT", 1)[1]
    )


@pytest.mark.django_db
def test_the_minutes_are_summed_into_their_buckets() -> None:
    start = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    for minute, success, fatal in ((0, 1, 0), (14, 2, 1), (15, 4, 0), (59, 8, 0), (60, 16, 0)):
        EndpointMinute.objects.create(
            endpoint_id="end_shop",
            minute=start + timedelta(minutes=minute),
            success=success,
            fatal=fatal,
            d_50=success + fatal,
        )
    EndpointMinute.objects.create(endpoint_id="end_other", minute=start, success=32, d_50=32)

    with statements_run() as ran:
        figures = endpoint_attempt_figures(
            endpoint_id="end_shop", start=start, step=timedelta(minutes=15), count=4
        )

    assert len(ran) == 1 and ran[0] in (
        stats_sql.ENDPOINT_BUCKETS,
        stats_sql.ENDPOINT_BUCKETS_SQLITE,
    )
    assert [(b.start.minute, b.success, b.fatal) for b in figures.buckets] == [
        (0, 3, 1),
        (15, 4, 0),
        (30, 0, 0),
        (45, 8, 0),
    ]
    assert figures.attempts == {"success": 15, "retryable": 0, "fatal": 1}
    assert figures.durations[1] == 16
