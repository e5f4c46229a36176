"""The scheduler's sweep: the database, not Celery, decides when work happens.

Each tick wakes a worker when deliveries are due (retries whose time has come), and
takes back the deliveries of workers that died mid-attempt (their lease expired). Any
number of schedulers may run: the updates below are conditional, so each row goes to
one of them, and wake-ups are coalesced by the doorbell (wakeups.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from django.db.models.functions import Now

from deliveries.lifecycle.in_hand import EventInHand, InHand
from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.models import PENDING_IN_TIME_ORDER, Delivery
from deliveries.results import ErrorKind, SendResult
from deliveries.wakeups import wake_workers

logger = logging.getLogger(__name__)

# Most rows one tick handles; the rest wait for the next tick (a fraction of a second).
SWEEP_LIMIT = 2000
WORKER_LOST = "worker lost"


@dataclass(frozen=True)
class SweepReport:
    due: int
    recovered: int


def database_now() -> Now:
    # The database's clock, not this process's: every process compares due times and
    # leases against the same clock, however far their own drift.
    return Now()


def deliveries_sweep() -> SweepReport:
    recovered = deliveries_recover_expired_leases()
    due = deliveries_wake_for_due()
    return SweepReport(due=due, recovered=recovered)


def deliveries_wake_for_due() -> int:
    """Wake a worker if deliveries are due (retries whose time came, or a backlog):
    one message naming the earliest, unless a wake-up is already on its way. The worker
    then claims every due delivery, batch after batch (it finds them through their
    endpoints, not by the ids a message names: one is enough to say, in logs, what woke
    it, and a hundred were read and serialised four times a second for nothing).
    Returns how many were named."""
    due = list(
        Delivery.objects.filter(
            PENDING_IN_TIME_ORDER, next_attempt_at__lte=database_now()
        ).values_list("id", flat=True)[:1]
    )
    if due:
        wake_workers(due)
    return len(due)


def deliveries_recover_expired_leases() -> int:
    """Record a `worker lost` attempt for claims whose worker never reported back.

    The attempt may or may not have reached the receiver: it is retried (at least once),
    with the same webhook-id so the receiver can tell. Recorded like any attempt
    (recording.py), taking only leases that are still expired when written.
    """
    policy = current_policy()
    rows = (
        Delivery.objects.filter(
            status=Delivery.Status.DELIVERING, lease_expires_at__lt=database_now()
        )
        .order_by("lease_expires_at")
        .values_list(
            "id",
            "tenant_id",
            "attempt_count",
            "schedule_offset",
            "event_id",
            "event__type",
            "event__created_at",
            "endpoint_id",
            "lease_expires_at",
            "ordering_key",
            "head_since",
        )[:SWEEP_LIMIT]
    )
    lost = SendResult.failed(ErrorKind.WORKER_LOST, WORKER_LOST)
    outcomes = [
        Attempted(
            InHand(
                id=d_id,
                tenant_id=tenant,
                endpoint_id=endpoint,
                event=EventInHand(e_id, e_type, None, e_at),
                attempt_count=count,
                schedule_offset=offset,
                ordering_key=key,
                head_since=since,
            ),
            lost,
            # Never None: `lease_expires_at__lt` leaves out the rows without one.
            cast(datetime, lease) - timedelta(seconds=policy.lease_seconds),
            policy,
        )
        for d_id, tenant, count, offset, e_id, e_type, e_at, endpoint, lease, key, since in rows
    ]
    if not outcomes:
        return 0
    recovered = sum(1 for r in attempts_record(outcomes=outcomes, expired_only=True) if r)
    if recovered:
        logger.warning("took back %d deliveries from workers that died mid-attempt", recovered)
    return recovered
