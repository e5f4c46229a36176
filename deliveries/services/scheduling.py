"""The scheduler's sweep: the database, not Celery, decides when work happens.

Each tick publishes due deliveries that no message is out for, and takes back the
deliveries of workers that died mid-attempt (their lease expired). Any number of
schedulers may run: the updates below are conditional, so each row goes to one of them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from deliveries.models import Attempt, Delivery
from deliveries.policy import current_policy
from deliveries.queue import publish_deliveries
from deliveries.sender import SendResult
from deliveries.services.attempts import BATCH_SIZE
from deliveries.services.creation import DISPATCH_GRACE
from deliveries.services.outcomes import next_state
from dlq.services.dead_letters import dead_letters_create
from webhooks.services import counters

logger = logging.getLogger(__name__)

# Most rows one tick handles; the rest wait for the next tick (a fraction of a second).
SWEEP_LIMIT = 2000
WORKER_LOST = "worker lost"


@dataclass(frozen=True)
class SweepReport:
    published: int
    recovered: int


def deliveries_sweep() -> SweepReport:
    recovered = deliveries_recover_expired_leases()
    published = deliveries_publish_due()
    return SweepReport(published=published, recovered=recovered)


def deliveries_publish_due() -> int:
    """Publish due deliveries that have no message out (or whose message was lost)."""
    now = timezone.now()
    table = Delivery._meta.db_table
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    # Two index range scans (see the indexes on Delivery): never the whole backlog of
    # due deliveries whose messages are still on their way. No ORDER BY, as in claims.py.
    sql = (
        f"UPDATE {table} SET dispatched_until = %s WHERE (id IN ("
        f"SELECT id FROM {table} WHERE status = 'pending' AND dispatched_until IS NULL "
        f"AND next_attempt_at <= %s LIMIT %s{skip_locked}) "
        f"OR id IN (SELECT id FROM {table} WHERE status = 'pending' "
        f"AND dispatched_until IS NOT NULL AND dispatched_until < %s "
        f"AND next_attempt_at <= %s LIMIT %s{skip_locked})) "
        f"AND status = 'pending' RETURNING id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [now + DISPATCH_GRACE, now, SWEEP_LIMIT, now, now, SWEEP_LIMIT])
        due = [row[0] for row in cursor.fetchall()]
    for start in range(0, len(due), BATCH_SIZE):
        publish_deliveries(due[start : start + BATCH_SIZE])
    return len(due)


def deliveries_recover_expired_leases() -> int:
    """Record a `worker lost` attempt for claims whose worker never reported back.

    The attempt may or may not have reached the receiver: it is retried (at least once),
    with the same webhook-id so the receiver can tell.
    """
    now = timezone.now()
    policy = current_policy()
    expired = list(
        Delivery.objects.select_related("event")
        .filter(status=Delivery.Status.DELIVERING, lease_expires_at__lt=now)
        .order_by("lease_expires_at")[:SWEEP_LIMIT]
    )
    lost = SendResult(None, WORKER_LOST, b"", None, 0)
    recovered = 0
    with transaction.atomic():
        dead = []
        for delivery in expired:
            state = next_state(delivery=delivery, result=lost, policy=policy, now=now)
            taken = Delivery.objects.filter(
                pk=delivery.pk,
                status=Delivery.Status.DELIVERING,
                attempt_count=delivery.attempt_count,
                lease_expires_at=delivery.lease_expires_at,
            ).update(**state.fields, updated_at=now)
            if not taken:
                continue
            recovered += 1
            Attempt.objects.bulk_create(
                [
                    Attempt(
                        delivery=delivery,
                        number=delivery.attempt_count,
                        error=WORKER_LOST,
                        started_at=delivery.lease_expires_at
                        - timedelta(seconds=policy.lease_seconds),
                    )
                ],
                ignore_conflicts=True,
            )
            if state.dead_reason:
                dead.append((delivery, state.dead_reason))
        if dead:
            dead_letters_create(
                deliveries=[d for d, _ in dead], reasons=[r for _, r in dead], dead_at=now
            )
    if recovered:
        logger.warning("took back %d deliveries from workers that died mid-attempt", recovered)
        counters.increment("attempts_retryable", recovered)
    return recovered


def deliveries_refresh_statistics() -> None:
    """ANALYZE the deliveries table (PostgreSQL).

    Its rows change state faster than autovacuum's default cadence notices; on stale
    statistics (e.g. a table that went from empty to thousands of due rows within a
    minute) the planner misjudges the claim queries by orders of magnitude.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Delivery._meta.db_table}")
