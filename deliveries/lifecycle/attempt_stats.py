"""The per-minute aggregate of attempts by outcome (AttemptMinute)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.db import connection

from deliveries.lifecycle.record_sql import ATTEMPT_MINUTES_ADD
from deliveries.lifecycle.retry import Outcome


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
