"""Claiming due deliveries: conditional UPDATE … RETURNING, safe under concurrency.

A claim moves `pending` rows whose time has come to `delivering` with a lease and
numbers their attempt. Two claimers never get the same row: SKIP LOCKED makes them
take disjoint rows on PostgreSQL, and the outer `status` check is re-evaluated on a
row a concurrent claimer just changed (the only guard on SQLite, which serialises
writers anyway).

An endpoint has at most ENDPOINT_MAX_IN_FLIGHT attempts in flight, so one slow or
hanging endpoint cannot take every sending thread: a claim that overshoots gives the
excess back, due again a moment later.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Count, F
from django.utils import timezone

from deliveries.models import Delivery
from deliveries.policy import Policy

# Enough for one endpoint to take 1,000+ deliveries/s at ~50 ms per round trip, and
# a quarter of one worker's sending threads when it hangs.
ENDPOINT_MAX_IN_FLIGHT = 50
# How long a delivery given back for its endpoint's cap waits before it is due again.
CAP_BACKOFF = timedelta(milliseconds=500)


def deliveries_claim(
    *, delivery_ids: Sequence[str], limit: int, policy: Policy, take_more: bool
) -> list[str]:
    """Claim these deliveries if due and free, then (with `take_more`) other due ones up
    to `limit`. Returns the claimed ids.

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
    return _within_endpoint_caps(claimed, now)


def _claim(
    condition: str, params: list[str], now: datetime, lease_until: datetime, limit: int
) -> list[tuple[str, str]]:
    table = Delivery._meta.db_table
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    sql = f"""
        UPDATE {table} SET status = 'delivering', lease_expires_at = %s,
            attempt_count = attempt_count + 1, dispatched_until = NULL, updated_at = %s
        WHERE id IN (
            SELECT id FROM {table}
            WHERE {condition} AND status = 'pending' AND next_attempt_at <= %s
            ORDER BY next_attempt_at LIMIT %s{skip_locked}
        ) AND status = 'pending' AND next_attempt_at <= %s
        RETURNING id, endpoint_id
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [lease_until, now, *params, now, limit, now])
        return [(row[0], row[1]) for row in cursor.fetchall()]


def _within_endpoint_caps(claimed: list[tuple[str, str]], now: datetime) -> list[str]:
    if not claimed:
        return []
    mine: dict[str, list[str]] = defaultdict(list)
    for delivery_id, endpoint_id in claimed:
        mine[endpoint_id].append(delivery_id)
    # One index read per endpoint (deliveries_delivery.endpoint_id), over its few
    # in-flight rows; ours included.
    in_flight = dict(
        Delivery.objects.filter(endpoint_id__in=mine, status=Delivery.Status.DELIVERING)
        .values_list("endpoint_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    excess: list[str] = []
    for endpoint_id, ids in mine.items():
        over = in_flight.get(endpoint_id, 0) - ENDPOINT_MAX_IN_FLIGHT
        if over > 0:
            excess += ids[-min(over, len(ids)) :]
    if excess:
        Delivery.objects.filter(pk__in=excess, status=Delivery.Status.DELIVERING).update(
            status=Delivery.Status.PENDING,
            lease_expires_at=None,
            attempt_count=F("attempt_count") - 1,
            next_attempt_at=now + CAP_BACKOFF,
            updated_at=now,
        )
    given_back = set(excess)
    return [delivery_id for delivery_id, _ in claimed if delivery_id not in given_back]
