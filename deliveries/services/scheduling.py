"""The scheduler's sweep: the database, not Celery, decides when work happens.

Each tick wakes a worker when deliveries are due (retries whose time has come), and
takes back the deliveries of workers that died mid-attempt (their lease expired). Any
number of schedulers may run: the updates below are conditional, so each row goes to
one of them, and wake-ups are coalesced by the doorbell (queue.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from core import counters
from deliveries.models import Attempt, Delivery
from deliveries.policy import current_policy
from deliveries.queue import wake_workers
from deliveries.sender import SendResult
from deliveries.services.attempt_stats import attempt_minutes_add
from deliveries.services.attempts import BATCH_SIZE
from deliveries.services.outcomes import next_state
from dlq.services.dead_letters import dead_letters_create

logger = logging.getLogger(__name__)

# Most rows one tick handles; the rest wait for the next tick (a fraction of a second).
SWEEP_LIMIT = 2000
WORKER_LOST = "worker lost"


@dataclass(frozen=True)
class SweepReport:
    due: int
    recovered: int


def deliveries_sweep() -> SweepReport:
    recovered = deliveries_recover_expired_leases()
    due = deliveries_wake_for_due()
    return SweepReport(due=due, recovered=recovered)


def deliveries_wake_for_due() -> int:
    """Wake a worker if deliveries are due (retries whose time came, or a backlog):
    one message naming up to a batch of them, unless a wake-up is already on its way.
    The worker then claims every due delivery, batch after batch. Returns how many were
    named."""
    due = list(
        Delivery.objects.filter(
            status=Delivery.Status.PENDING, next_attempt_at__lte=timezone.now()
        ).values_list("id", flat=True)[:BATCH_SIZE]
    )
    if due:
        wake_workers(due)
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
        attempt_minutes_add(counts={"retryable": recovered}, at=now)
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
