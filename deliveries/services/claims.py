"""Claiming due deliveries: one conditional UPDATE … RETURNING, safe under concurrency.

A claim moves `pending` rows whose time has come to `delivering` with a lease and
numbers their attempt. Two claimers never get the same row: the outer `status` check
is re-evaluated on the row a concurrent claimer just changed, so the loser skips it.
An endpoint never has more than ENDPOINT_MAX_IN_FLIGHT attempts in flight, so one slow
or hanging endpoint cannot take every sending thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from deliveries.models import Delivery
from deliveries.policy import Policy

ENDPOINT_MAX_IN_FLIGHT = 10
# How many of the most overdue rows one claim looks at; saturated endpoints' rows are
# skipped before this limit, so they cannot hide other endpoints' work from it.
CANDIDATES = 500


def deliveries_claim(
    *, delivery_ids: Sequence[str], limit: int, policy: Policy, take_more: bool
) -> list[str]:
    """Claim these deliveries if due and free, then (with `take_more`) other due ones,
    up to `limit`. Returns the claimed ids."""
    now = timezone.now()
    lease_until = now + timedelta(seconds=policy.lease_seconds)
    claimed: list[str] = []
    if delivery_ids and limit:
        ids = list(delivery_ids)[:limit]
        placeholders = ", ".join(["%s"] * len(ids))
        claimed += _claim(f"id IN ({placeholders})", ids, now, lease_until, limit)
    if take_more and len(claimed) < limit:
        claimed += _claim("1 = 1", [], now, lease_until, limit - len(claimed))
    return claimed


def _claim(
    condition: str, params: list[str], now: datetime, lease_until: datetime, limit: int
) -> list[str]:
    table = Delivery._meta.db_table
    busy = (
        f"SELECT endpoint_id, COUNT(*) AS busy FROM {table} "
        f"WHERE status = 'delivering' GROUP BY endpoint_id"
    )
    sql = f"""
        UPDATE {table} SET status = 'delivering', lease_expires_at = %s,
            attempt_count = attempt_count + 1, dispatched_until = NULL, updated_at = %s
        WHERE id IN (
            SELECT due.id FROM (
                SELECT id, endpoint_id, next_attempt_at, ROW_NUMBER() OVER (
                    PARTITION BY endpoint_id ORDER BY next_attempt_at) AS position
                FROM (
                    SELECT id, endpoint_id, next_attempt_at FROM {table}
                    WHERE {condition} AND status = 'pending' AND next_attempt_at <= %s
                    AND endpoint_id NOT IN (
                        SELECT endpoint_id FROM ({busy}) saturated WHERE busy >= %s)
                    ORDER BY next_attempt_at LIMIT %s
                ) candidates
            ) due
            LEFT JOIN ({busy}) in_flight ON in_flight.endpoint_id = due.endpoint_id
            WHERE due.position + COALESCE(in_flight.busy, 0) <= %s
            ORDER BY due.next_attempt_at LIMIT %s
        ) AND status = 'pending' AND next_attempt_at <= %s
        RETURNING id
    """
    values = [
        lease_until,
        now,
        *params,
        now,
        ENDPOINT_MAX_IN_FLIGHT,
        CANDIDATES,
        ENDPOINT_MAX_IN_FLIGHT,
        limit,
        now,
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, values)
        return [row[0] for row in cursor.fetchall()]
