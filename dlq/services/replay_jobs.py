"""Bulk replays in the background: a ReplayJob row, worked through in small batches.

Creating the job only counts what matches, so a replay of 100,000 answers at once. The
work then runs a batch per transaction (never one long one), in dead-letter id order,
saving a cursor after each batch: if the process dies, `replay_jobs_resume` (called by
the Celery task's redelivery, and by anyone polling a stalled job) carries on from it.

Backpressure (CONTRACT section 2: replays count like events): the request that starts a
job for a tenant is admitted like one event (429 while its backlog is full, and nothing
is recorded). The job then never fails a row for it: each batch replays only as many
letters as their tenants' backlogs have room for, and when a tenant has none the job
pauses at that letter (cursor kept, status running) and comes back PAUSE_SECONDS later,
for as long as it takes. It takes no place in the event-rate window: the rate limits
requests, and the job's pace is bounded by the backlog instead.
"""

from __future__ import annotations

import collections
import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Least
from django.utils import timezone

from core.celery import app
from deliveries.intake.backpressure import backlog_room, work_admit, work_admitted
from dlq.models import DeadLetter, ReplayJob
from dlq.selectors import Criteria, dead_letters_waiting
from dlq.services.replay import NotReplayable, dead_letters_replay
from webhooks.models import Endpoint, Tenant

logger = logging.getLogger(__name__)

# Dead letters replayed per transaction: a few hundred keeps each one well under a second.
REPLAY_BATCH = 500
# A running job whose heartbeat is older than this lost its process: resume it.
STALLED_AFTER = timedelta(seconds=60)
RUN_TASK = "dlq.replay_job_run"
# A job paused by a full backlog looks again this much later: room opens as deliveries
# finish, and the backlog figure is counted again at most every second or so.
PAUSE_SECONDS = 5


def replay_job_create(*, criteria: Criteria | dict[str, Any], requested_by: str = "") -> ReplayJob:
    """Count the matching waiting dead letters, record the job, start it after commit."""
    now = timezone.now()
    total = dead_letters_waiting(criteria=criteria).filter(dead_at__lte=now).count()
    if total and criteria.get("tenant"):
        # Or 429, nothing recorded. A staff job across tenants is paced by its batches.
        work_admit(tenant_id=criteria["tenant"])
    job = ReplayJob.objects.create(
        criteria=dict(criteria),
        total=total,
        requested_by=requested_by,
        created_at=now,
        updated_at=now,
        status=ReplayJob.Status.FINISHED if total == 0 else ReplayJob.Status.RUNNING,
        finished_at=now if total == 0 else None,
    )
    if total:
        transaction.on_commit(lambda: replay_job_publish(job_id=job.pk))
    return job


def endpoint_recover(
    *,
    endpoint: Endpoint,
    criteria: Criteria | dict[str, Any],
    since: datetime,
    until: datetime | None = None,
    requested_by: str = "",
) -> ReplayJob:
    """Replay, in the background, every dead delivery of `endpoint` that died from `since`
    (until `until`, default now). `criteria` limits it to the caller's scope."""
    if not endpoint.is_active:
        raise NotReplayable("The endpoint is deactivated; activate it, then recover.")
    window = {**criteria, "endpoint": endpoint.pk, "dead_after": since.isoformat()}
    if until is not None:
        window["dead_before"] = until.isoformat()
    return replay_job_create(criteria=window, requested_by=requested_by)


def replay_job_publish(*, job_id: str, countdown: float | None = None) -> None:
    try:
        app.send_task(RUN_TASK, args=[job_id], countdown=countdown)
    except Exception:  # broker down: the stalled-job resume picks it up later
        logger.warning("could not publish replay job %s", job_id, exc_info=True)


def replay_job_run_batch(*, job_id: str) -> bool:
    """Replay the next batch of a job; False when the job is finished (or taken)."""
    with transaction.atomic():
        # SKIP LOCKED: a second runner of the same job (a redelivered message) waits its
        # turn by stepping aside instead of replaying the same batch twice.
        job = (
            ReplayJob.objects.select_for_update(skip_locked=True)
            .filter(pk=job_id, status=ReplayJob.Status.RUNNING)
            .first()
        )
        if job is None:
            return False
        batch = list(
            dead_letters_waiting(criteria=job.criteria)
            .filter(dead_at__lte=job.created_at, pk__gt=job.cursor)
            .select_related("endpoint")
            .order_by("pk")[:REPLAY_BATCH]
        )
        now = timezone.now()
        if not batch:
            ReplayJob.objects.filter(pk=job.pk).update(
                status=ReplayJob.Status.FINISHED, done=F("total"), finished_at=now, updated_at=now
            )
            return False
        admitted = _within_backlogs(batch)
        paused = len(admitted) < len(batch)
        if not admitted:  # the first letter's tenant has no room: wait, change nothing
            ReplayJob.objects.filter(pk=job.pk).update(updated_at=now)  # not stalled
            transaction.on_commit(lambda: _pause(job_id))
            return False
        replayed = dead_letters_replay(dead_letters=admitted)
        progress: dict[str, Any] = {
            "cursor": admitted[-1].pk,
            "done": Least(F("done") + len(admitted), F("total")),
            "replayed": F("replayed") + replayed,
            "updated_at": now,
        }
        last = len(batch) < REPLAY_BATCH and not paused
        if last:  # finished with its last batch: a page never shows 100 % still running
            progress.update(status=ReplayJob.Status.FINISHED, done=F("total"), finished_at=now)
        ReplayJob.objects.filter(pk=job.pk).update(**progress)
        if paused:
            transaction.on_commit(lambda: _pause(job_id))
        return not last and not paused


def _within_backlogs(batch: list[DeadLetter]) -> list[DeadLetter]:
    """The longest head of `batch` whose letters fit in their tenants' backlogs now (each
    letter counted as one more unfinished delivery); counts them into the figures."""
    tenants = Tenant.objects.in_bulk({letter.tenant_id for letter in batch})
    room: dict[str, int] = {}
    taken: collections.Counter[str] = collections.Counter()
    admitted: list[DeadLetter] = []
    for letter in batch:
        tenant_id = letter.tenant_id
        if tenant_id not in room:
            room[tenant_id] = backlog_room(tenant=tenants[tenant_id])
        if taken[tenant_id] >= room[tenant_id]:
            break
        taken[tenant_id] += 1
        admitted.append(letter)
    for tenant_id, count in taken.items():
        work_admitted(tenant_id=tenant_id, deliveries=count)
    return admitted


def _pause(job_id: str) -> None:
    logger.info("replay job %s paused: a tenant's backlog is full", job_id)
    replay_job_publish(job_id=job_id, countdown=PAUSE_SECONDS)


def replay_job_run(*, job_id: str) -> None:
    """Run a job to the end, one short transaction per batch."""
    while replay_job_run_batch(job_id=job_id):
        pass


def replay_jobs_resume() -> int:
    """Restart running jobs nobody has advanced for STALLED_AFTER; returns how many."""
    stalled = list(
        ReplayJob.objects.filter(
            status=ReplayJob.Status.RUNNING, updated_at__lt=timezone.now() - STALLED_AFTER
        ).values_list("pk", flat=True)
    )
    for job_id in stalled:
        # Touch it first so that concurrent pollers do not all publish it.
        if ReplayJob.objects.filter(
            pk=job_id,
            status=ReplayJob.Status.RUNNING,
            updated_at__lt=timezone.now() - STALLED_AFTER,
        ).update(updated_at=timezone.now()):
            replay_job_publish(job_id=job_id)
    return len(stalled)
