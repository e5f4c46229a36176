"""Claiming due deliveries: conditional UPDATE … RETURNING, safe under concurrency.

A claim moves `pending` rows whose time has come to `delivering` with a lease and
numbers their attempt. Two claimers never get the same row: SKIP LOCKED makes them
take disjoint rows on PostgreSQL, and the outer `status` check is re-evaluated on a
row a concurrent claimer just changed (the only guard on SQLite, which serialises
writers anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from deliveries.models import Delivery
from deliveries.policy import Policy

# How long a delivery given back (its endpoint had too many attempts in flight) waits
# before it is due again.
GIVE_BACK_DELAY = timedelta(milliseconds=500)


def deliveries_claim(
    *, delivery_ids: Sequence[str], limit: int, policy: Policy, take_more: bool
) -> list[tuple[str, str]]:
    """Claim these deliveries if due and free, then (with `take_more`) other due ones up
    to `limit`. Returns (delivery id, endpoint id) pairs.

    Other due ones are taken only when all of `delivery_ids` were still free: if some
    were taken, another worker is already draining the backlog, and looking again would
    only contend with it.
    """
    now = timezone.now()
    lease_until = now + timedelta(seconds=policy.lease_seconds)
    ids = list(dict.fromkeys(delivery_ids))[:limit]
    claimed: list[tuple[str, str]] = []
    if ids:
        placeholders = ", ".join(["%s"] * len(ids))
        claimed += _claim(f"id IN ({placeholders})", ids, now, lease_until, limit)
    if take_more and len(claimed) == len(ids) and len(claimed) < limit:
        claimed += _claim("1 = 1", [], now, lease_until, limit - len(claimed))
    return claimed


def deliveries_give_back(
    *, delivery_ids: Sequence[str], delay: timedelta = GIVE_BACK_DELAY
) -> None:
    """Undo a claim without an attempt: the deliveries are due again after `delay`."""
    now = timezone.now()
    Delivery.objects.filter(pk__in=delivery_ids, status=Delivery.Status.DELIVERING).update(
        status=Delivery.Status.PENDING,
        lease_expires_at=None,
        attempt_count=F("attempt_count") - 1,
        next_attempt_at=now + delay,
        updated_at=now,
    )


def _claim(
    condition: str, params: list[str], now: datetime, lease_until: datetime, limit: int
) -> list[tuple[str, str]]:
    table = Delivery._meta.db_table
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    # No ORDER BY: with it, PostgreSQL sorts every due row (thousands in a backlog) on
    # each claim whenever its statistics are stale; without, the scan stops at `limit`.
    # A backlog still drains roughly oldest first, in the order rows were written.
    sql = f"""
        UPDATE {table} SET status = 'delivering', lease_expires_at = %s,
            attempt_count = attempt_count + 1, dispatched_until = NULL, updated_at = %s
        WHERE id IN (
            SELECT id FROM {table}
            WHERE {condition} AND status = 'pending' AND next_attempt_at <= %s
            LIMIT %s{skip_locked}
        ) AND status = 'pending' AND next_attempt_at <= %s
        RETURNING id, endpoint_id
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [lease_until, now, *params, now, limit, now])
        return [(row[0], row[1]) for row in cursor.fetchall()]
