"""The per-minute aggregates of attempts: by outcome for all (AttemptMinute), and by
endpoint with a duration histogram (EndpointMinute)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db import connection

from deliveries.lifecycle.record_sql import ATTEMPT_MINUTES_ADD, ENDPOINT_MINUTES_ADD
from deliveries.lifecycle.retry import Outcome

# The upper bounds (ms) of EndpointMinute's duration buckets, its columns d_<bound>, and
# d_more above the last: an attempt of d ms counts in the first whose bound d does not
# pass, DURATION_COLUMNS[bisect_left(DURATION_BOUNDS_MS, d)] (inline where it runs per
# attempt). Coarse on purpose: p50/p95 are read to within a bucket, and ten counters per
# endpoint-minute keep a week of one endpoint at 10,080 small rows.
DURATION_BOUNDS_MS = (25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
DURATION_COLUMNS = (*(f"d_{bound}" for bound in DURATION_BOUNDS_MS), "d_more")


OUTCOMES = frozenset(outcome.value for outcome in Outcome)
# An endpoint-minute row's counters before its first attempt.
ZEROS = dict.fromkeys((*OUTCOMES, *DURATION_COLUMNS), 0)


def attempt_duration_counts(attempts: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    """The shared counters behind /metrics' homing_attempt_duration_seconds histogram for
    `attempts` ((endpoint id, outcome, duration ms) each): per outcome, one counter per
    duration bucket (`duration_<outcome>_<column>`, not cumulative) and the sum in ms
    (`duration_<outcome>_sum_ms`); the count is `attempts_<outcome>`."""
    counts: dict[str, int] = {}
    for _, outcome, duration_ms in attempts:
        column = DURATION_COLUMNS[bisect.bisect_left(DURATION_BOUNDS_MS, duration_ms)]
        bucket = f"duration_{outcome}_{column}"
        counts[bucket] = counts.get(bucket, 0) + 1
        total = f"duration_{outcome}_sum_ms"
        counts[total] = counts.get(total, 0) + duration_ms
    return counts


def attempt_minutes_add(*, counts: Mapping[str, int], at: datetime) -> None:
    """Add `counts` (outcome -> attempts) to the minute containing `at`.

    One upsert for all outcomes (record_sql.ATTEMPT_MINUTES_ADD), the same on PostgreSQL
    and SQLite; concurrent recorders add up instead of overwriting.
    """
    unknown = set(counts) - set(Outcome)
    if unknown:
        raise ValueError(f"not outcomes: {sorted(unknown)}")
    if not any(counts.values()):
        return
    minute = at.replace(second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            ATTEMPT_MINUTES_ADD,
            {"minute": minute, **{outcome.value: counts.get(outcome, 0) for outcome in Outcome}},
        )


def endpoint_minutes_add(*, attempts: Iterable[tuple[str, str, int]], at: datetime) -> None:
    """Add `attempts` ((endpoint id, outcome, duration ms) each) to their endpoints'
    minute containing `at`: one upsert per endpoint (record_sql.ENDPOINT_MINUTES_ADD),
    sent together, in endpoint order."""
    # As the ORM stores it: SQLite keeps the minute as text, compared as text.
    minute = connection.ops.adapt_datetimefield_value(at.replace(second=0, microsecond=0))
    rows: dict[str, dict[str, Any]] = {}
    for endpoint_id, outcome, duration_ms in attempts:
        if outcome not in OUTCOMES:
            raise ValueError(f"not an outcome: {outcome}")
        row = rows.get(endpoint_id)
        if row is None:  # built once per endpoint, not per attempt
            row = rows[endpoint_id] = {"endpoint_id": endpoint_id, "minute": minute, **ZEROS}
        row[outcome] += 1
        row[DURATION_COLUMNS[bisect.bisect_left(DURATION_BOUNDS_MS, duration_ms)]] += 1
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(ENDPOINT_MINUTES_ADD, [rows[key] for key in sorted(rows)])
