"""The per-minute aggregate of attempts by outcome (AttemptMinute)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import connection

from deliveries.models import AttemptMinute


def attempt_minutes_add(*, counts: Mapping[str, int], at: datetime) -> None:
    """Add `counts` (outcome -> attempts) to the minute containing `at`.

    One upsert for all outcomes; `INSERT … ON CONFLICT DO UPDATE` works on PostgreSQL
    and SQLite alike, and concurrent recorders add up instead of overwriting.
    """
    rows = [(outcome, n) for outcome, n in counts.items() if n]
    if not rows:
        return
    minute = at.replace(second=0, microsecond=0)
    table = AttemptMinute._meta.db_table
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    params: list[Any] = []
    for outcome, n in rows:
        params += [minute, outcome, n]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (minute, outcome, count) VALUES {values} "  # noqa: S608
            f"ON CONFLICT (minute, outcome) DO UPDATE SET count = {table}.count + EXCLUDED.count",
            params,
        )
