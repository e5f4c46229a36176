"""Retention: finished events older than HOMING_RETENTION go, with their deliveries and
attempts; so do expired idempotency records, and the endpoint statistics' minutes older
than the longest period they answer for.

An event is finished when every delivery of it has succeeded or is dead with its dead
letter settled (replayed, or discarded where dead letters can be discarded). A dead
letter still waiting in the queue keeps its event, delivery and attempts.

Deletes run in small batches, each in its own short transaction, walking the
`event_created` index oldest first: never one big DELETE, never a long lock, so the
scheduler can run this every minute while workers write the same tables.

On PostgreSQL, history is partitioned by time (deliveries/lifecycle/partitions.py): the
intervals wholly past HOMING_RETENTION are dropped first, a DROP each, whatever their
rows. The batched delete then finds only what no drop could take: rows in the default
partition (ids from before the current alphabet, rows a replay put back) and rows of
intervals kept for an unfinished delivery. Dead letters whose event went with its
interval go too once they are settled; a waiting one keeps what its replay needs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Q

from core.clock import database_now
from deliveries.lifecycle.partitions import (
    EVENTS,
    history_partitioned,
    partitions_drop_expired,
    partitions_list,
)
from deliveries.models import Attempt, Delivery, EndpointMinute, SequenceCounter
from dlq.models import DeadLetter
from webhooks.models import Event, IdempotencyRecord

logger = logging.getLogger(__name__)

# Events per transaction: a few thousand rows locked for a few milliseconds at most.
BATCH_SIZE = 500
FINISHED = (Delivery.Status.SUCCEEDED, Delivery.Status.DEAD)
# EndpointMinute rows are read for at most 7 days (dlq.selectors.STATS_PERIODS) and an
# hour's bucket alignment: older ones go, whatever HOMING_RETENTION.
ENDPOINT_MINUTES_KEPT = timedelta(days=7, hours=2)


@dataclass
class PurgeReport:
    events: int = 0
    deliveries: int = 0
    attempts: int = 0
    dead_letters: int = 0
    idempotency_records: int = 0
    partitions: int = 0  # dropped whole (PostgreSQL)
    complete: bool = True  # False when the time budget ran out first

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "complete"}

    def __str__(self) -> str:
        return ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in self.as_dict().items())


def retention_purge(
    *,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[PurgeReport], None] | None = None,
    time_budget: float | None = None,
) -> PurgeReport:
    """Purge (or with dry_run only count) what retention allows; returns the counts.

    With a time_budget (seconds) no new batch starts after it is spent and the report
    says `complete=False`: the scheduler calls again on its next tick, so a large first
    purge never delays its sweeps by more than the budget.
    """
    now = database_now()
    deadline = time.monotonic() + time_budget if time_budget is not None else None
    cutoff = now - timedelta(seconds=settings.HOMING_RETENTION)
    report = PurgeReport()
    partitioned = history_partitioned()
    if partitioned:
        _drop_partitions(now=now, report=report, dry_run=dry_run, batch_size=batch_size)
    cursor: tuple[datetime, str] | None = None
    while batch := _old_events(
        cutoff=cutoff, after=cursor, limit=batch_size, partitioned=partitioned
    ):
        cursor = batch[-1]
        _purge_batch(event_ids=[pk for _, pk in batch], report=report, dry_run=dry_run)
        if progress:
            progress(report)
        if deadline is not None and time.monotonic() > deadline:
            report.complete = False
            break
    else:
        _purge_idempotency_records(
            now=now, report=report, dry_run=dry_run, batch_size=batch_size, deadline=deadline
        )
        if not dry_run:
            _purge_endpoint_minutes(now=now, batch_size=batch_size * 10, deadline=deadline)
    if not dry_run and any(report.as_dict().values()):
        logger.info("retention purge: %s", report, extra=report.as_dict())
    return report


def _drop_partitions(*, now: datetime, report: PurgeReport, dry_run: bool, batch_size: int) -> None:
    for outcome in partitions_drop_expired(now_ms=int(now.timestamp() * 1000), dry_run=dry_run):
        if outcome.action == "dropped":
            report.partitions += len(outcome.partitions)
            if not dry_run:
                logger.info("retention: %s", outcome)
        else:
            logger.info("retention: %s", outcome)
    if not dry_run and report.partitions:
        report.dead_letters += _purge_orphaned_dead_letters(batch_size=batch_size)


def _purge_orphaned_dead_letters(*, batch_size: int) -> int:
    """Settled dead letters whose event was dropped with its interval: below the oldest
    interval left, and not in the default partition either."""
    starts = [p.start_ms for p in partitions_list() if p.table == EVENTS.table and p.start_ms]
    if not starts:
        return 0
    floor = EVENTS.bound(min(starts))
    settled = DeadLetter.objects.filter(event_id__lt=floor).exclude(_waiting_dead_letters())
    deleted = 0
    while ids := list(
        settled.exclude(event_id__in=Event.objects.filter(id__lt=floor).values("id"))
        .order_by("event_id")
        .values_list("pk", flat=True)[:batch_size]
    ):
        deleted += DeadLetter.objects.filter(pk__in=ids).delete()[0]
    return deleted


def _old_events(
    *, cutoff: datetime, after: tuple[datetime, str] | None, limit: int, partitioned: bool
) -> list[tuple[datetime, str]]:
    """The next events older than the cutoff, oldest first (index event_created).

    Partitioned: those of the default partition only. An interval's rows wait for its
    drop, however many of them are past the cutoff already (deleting them one by one is
    the cost partitions are there to spare)."""
    if partitioned:
        return _old_events_by_default(cutoff=cutoff, after=after, limit=limit)
    events = Event.objects.filter(created_at__lt=cutoff)
    if after is not None:
        # Keyset: held-back events stay behind the cursor instead of being read again.
        at, pk = after
        events = events.filter(created_at__gte=at).filter(
            Q(created_at__gt=at) | Q(created_at=at, id__gt=pk)
        )
    return list(events.order_by("created_at", "id").values_list("created_at", "id")[:limit])


def _old_events_by_default(
    *, cutoff: datetime, after: tuple[datetime, str] | None, limit: int
) -> list[tuple[datetime, str]]:
    keyset = "AND (created_at, id) > (%s, %s)" if after is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT created_at, id FROM {EVENTS.default} WHERE created_at < %s {keyset}"  # noqa: S608
            " ORDER BY created_at, id LIMIT %s",
            [cutoff, *(after or ()), limit],
        )
        return list(cursor.fetchall())


def _waiting_dead_letters() -> Q:
    waiting = Q(replayed_at__isnull=True)
    if any(field.name == "discarded_at" for field in DeadLetter._meta.get_fields()):
        waiting &= Q(discarded_at__isnull=True)
    return waiting


def _purge_batch(*, event_ids: list[str], report: PurgeReport, dry_run: bool) -> None:
    with transaction.atomic():
        # Lock the deliveries first (in id order, as everyone does) so none of them can
        # be retried or replayed between this check and the delete.
        deliveries = list(
            Delivery.objects.select_for_update()
            .filter(event_id__in=event_ids)
            .order_by("id")
            .values_list("id", "event_id", "status")
        )
        held = {event for _, event, status in deliveries if status not in FINISHED}
        held |= set(
            DeadLetter.objects.filter(_waiting_dead_letters(), event_id__in=event_ids).values_list(
                "event_id", flat=True
            )
        )
        events = [pk for pk in event_ids if pk not in held]
        delivery_ids = [pk for pk, event, _ in deliveries if event not in held]
        if not events:
            return
        if dry_run:
            report.events += len(events)
            report.deliveries += len(delivery_ids)
            report.attempts += Attempt.objects.filter(delivery_id__in=delivery_ids).count()
            report.dead_letters += DeadLetter.objects.filter(event_id__in=events).count()
            return
        highest = _highest_sequences(delivery_ids)  # read while the rows are there
        # Children first: each DELETE is a plain indexed one (no collector cascade).
        report.dead_letters += DeadLetter.objects.filter(event_id__in=events).delete()[0]
        report.attempts += Attempt.objects.filter(delivery_id__in=delivery_ids).delete()[0]
        report.deliveries += Delivery.objects.filter(id__in=delivery_ids).delete()[0]
        report.events += Event.objects.filter(id__in=events).delete()[0]
        # Last: an ingestion waits on its endpoints' counter rows (it locks them until
        # its commit), so they are locked for this commit only, never for the deletes.
        _mark_purged_sequences(highest)


def _highest_sequences(delivery_ids: list[str]) -> list[tuple[str, int]]:
    """(endpoint id, highest sequence among `delivery_ids`), in endpoint id order."""
    return list(
        Delivery.objects.filter(id__in=delivery_ids)
        .values_list("endpoint_id")
        .annotate(highest=Max("sequence"))
        .order_by("endpoint_id")
    )


def _mark_purged_sequences(highest: list[tuple[str, int]]) -> None:
    """Raise each endpoint's `purged_through` past the sequences purged, in the purge's
    transaction: the catch-up feed then answers 410 below it instead of skipping a
    number (deliveries/selectors.py), and sees the rows gone and the boundary moved in
    one commit. Counters in endpoint id order, as ingestion locks them."""
    for endpoint_id, sequence in highest:
        SequenceCounter.objects.filter(endpoint_id=endpoint_id, purged_through__lt=sequence).update(
            purged_through=sequence
        )


def _purge_idempotency_records(
    *, now: datetime, report: PurgeReport, dry_run: bool, batch_size: int, deadline: float | None
) -> None:
    expired = IdempotencyRecord.objects.filter(expires_at__lte=now)  # index idempotency_expires
    if dry_run:
        report.idempotency_records = expired.count()
        return
    while ids := list(expired.order_by("expires_at").values_list("pk", flat=True)[:batch_size]):
        report.idempotency_records += IdempotencyRecord.objects.filter(pk__in=ids).delete()[0]
        if deadline is not None and time.monotonic() > deadline:
            report.complete = False
            return


def _purge_endpoint_minutes(*, now: datetime, batch_size: int, deadline: float | None) -> None:
    """Delete the endpoint statistics' minutes past ENDPOINT_MINUTES_KEPT, oldest first.

    Walks the primary key: a row is made when its minute is the present one (recording
    upserts into the minute under way), so id order is minute order, and no index on
    `minute` alone has to be written by every recorded batch for this."""
    cutoff = now - ENDPOINT_MINUTES_KEPT
    deleted = 0
    while True:
        oldest = EndpointMinute.objects.order_by("pk").values_list("pk", "minute")[:batch_size]
        ids = [pk for pk, minute in oldest if minute < cutoff]
        if not ids:
            break
        deleted += EndpointMinute.objects.filter(pk__in=ids).delete()[0]
        if deadline is not None and time.monotonic() > deadline:
            break
    if deleted:
        logger.info("retention purge: %d endpoint statistics minutes", deleted)
