"""Reads of deliveries for the API: the catch-up feed, an endpoint's attempt figures."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import BinaryField, F, Func, IntegerField, TextField
from django.db.models.functions import Cast, Length

from core.exceptions import HomingError
from deliveries.lifecycle.attempt_stats import DURATION_BOUNDS_MS
from deliveries.lifecycle.retry import Outcome
from deliveries.models import Delivery, SequenceCounter
from deliveries.stats_sql import ENDPOINT_BUCKETS, ENDPOINT_BUCKETS_SQLITE
from deliveries.statuses import public_status
from webhooks.models import Endpoint

FEED_DEFAULT_LIMIT = 100
FEED_MAX_LIMIT = 500
# Event data one page loads at most (past its first message): 500 events of 256 KiB
# would otherwise be 128 MiB in one answer.
FEED_MAX_BYTES = 4 * 1024 * 1024


class FeedExpired(HomingError):
    """Retention purged deliveries after the asked-for sequence: the receiver must
    reconcile some other way, then go on from `oldest_sequence`."""

    status_code = 410

    def __init__(self, oldest_sequence: int) -> None:
        super().__init__(
            "Deliveries after this sequence were purged by retention; "
            f"the oldest the feed still has is {oldest_sequence}."
        )
        self.oldest_sequence = oldest_sequence

    def details(self) -> dict[str, Any]:
        return {"oldest_sequence": self.oldest_sequence}


@dataclass(frozen=True, slots=True)
class FeedPage:
    messages: list[dict[str, Any]]
    next_after: int  # the `after` of the next page
    done: bool  # nothing after next_after (as of this read)


def endpoint_messages(*, endpoint: Endpoint, after: int, limit: int) -> FeedPage:
    """The endpoint's deliveries with a sequence above `after`, in ascending sequence,
    whatever their status, through the `delivery_endpoint_sequence` index.

    Every sequence above `after` is there to read: numbers are taken in commit order
    (services/sequences.py), and retention raises the counter's `purged_through` mark
    past any number it deletes, so a page never silently skips one: asked from below
    the mark, the feed answers FeedExpired."""
    purged_through = (
        SequenceCounter.objects.filter(endpoint=endpoint)
        .values_list("purged_through", flat=True)
        .first()
        or 0
    )
    if after < purged_through:
        raise FeedExpired(purged_through + 1)
    # The page's rows first with only the size of their data, so that a page of large
    # events stops at FEED_MAX_BYTES (at least one message) before any data is loaded.
    heads = list(
        Delivery.objects.filter(endpoint=endpoint, sequence__gt=after)
        .order_by("sequence")
        .annotate(size=_text_bytes("event__data"))
        .values_list("id", "size")[: limit + 1]
    )
    taken: list[str] = []
    total = 0
    for delivery_id, size in heads[:limit]:
        total += size or 0
        if taken and total > FEED_MAX_BYTES:
            break
        taken.append(delivery_id)
    rows = (
        Delivery.objects.filter(pk__in=taken)
        .order_by("sequence")
        .values_list(
            "sequence",
            "event_id",
            "event__type",
            "event__created_at",
            "event__data",
            "event__ordering_key",
            "id",
            "status",
        )
    )
    messages = [
        {
            "sequence": sequence,
            "event_id": event_id,
            "type": event_type,
            "created_at": created_at,
            "ordering_key": ordering_key,
            "data": data,
            "delivery_id": delivery_id,
            "status": public_status(status),
        }
        for sequence, event_id, event_type, created_at, data, ordering_key, delivery_id, status in (
            rows
        )
    ]
    return FeedPage(
        messages=messages,
        next_after=messages[-1]["sequence"] if messages else after,
        done=len(heads) == len(taken),
    )


def _text_bytes(field: str) -> Func:
    """The bytes of a JSON column as text: at least what the API sends of it (compact
    UTF-8). Not `pg_column_size`, the stored size: it is compressed, so a page of
    repetitive 200 KB events weighed a few KB each and came to 50 MB."""
    if connection.vendor == "postgresql":
        return Func(
            Cast(F(field), TextField()), function="octet_length", output_field=IntegerField()
        )
    return Length(Cast(F(field), BinaryField()))  # SQLite: LENGTH of a BLOB counts bytes


@dataclass(frozen=True, slots=True)
class AttemptBucket:
    start: datetime
    success: int
    retryable: int
    fatal: int


@dataclass(frozen=True, slots=True)
class AttemptFigures:
    """One endpoint's attempts over some buckets, from the per-minute figures."""

    attempts: dict[str, int]  # outcome -> attempts
    durations: list[int]  # attempts per duration bucket (attempt_stats.DURATION_BOUNDS_MS)
    buckets: list[AttemptBucket]

    def duration_quantile(self, q: float) -> int | None:
        """The duration (ms) below which a share `q` of the attempts took, linearly
        interpolated within its histogram bucket (as Prometheus' histogram_quantile);
        None without attempts. Above the last bound it answers that bound."""
        total = sum(self.durations)
        if not total:
            return None
        rank, seen, lower = q * total, 0, 0
        for bound, n in zip((*DURATION_BOUNDS_MS, None), self.durations, strict=True):
            if bound is None:
                return DURATION_BOUNDS_MS[-1]
            if n and seen + n >= rank:
                return round(lower + (bound - lower) * (rank - seen) / n)
            seen, lower = seen + n, bound
        return DURATION_BOUNDS_MS[-1]


def endpoint_attempt_figures(
    *, endpoint_id: str, start: datetime, step: timedelta, count: int
) -> AttemptFigures:
    """The endpoint's attempts in `count` buckets of `step` from `start` (every bucket
    listed, empty ones as zeros): one statement over its EndpointMinute rows
    (deliveries/stats_sql.py), never the attempts themselves."""
    step_seconds = int(step.total_seconds())
    sql = ENDPOINT_BUCKETS if connection.vendor == "postgresql" else ENDPOINT_BUCKETS_SQLITE
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "endpoint_id": endpoint_id,
                # As the ORM stores them (SQLite compares the minute as text).
                "start": connection.ops.adapt_datetimefield_value(start),
                "end": connection.ops.adapt_datetimefield_value(start + step * count),
                "start_epoch": int(start.timestamp()),
                "step": step_seconds,
            },
        )
        rows = {int(row[0]): [int(n or 0) for n in row[1:]] for row in cursor.fetchall()}
    outcomes = [o.value for o in Outcome]
    attempts = dict.fromkeys(outcomes, 0)
    durations = [0] * (len(DURATION_BOUNDS_MS) + 1)
    buckets = []
    for index in range(count):
        sums = rows.get(index, [0] * (len(outcomes) + len(durations)))
        by_outcome = dict(zip(outcomes, sums[: len(outcomes)], strict=True))
        for outcome, n in by_outcome.items():
            attempts[outcome] += n
        for i, n in enumerate(sums[len(outcomes) :]):
            durations[i] += n
        buckets.append(AttemptBucket(start=start + step * index, **by_outcome))
    return AttemptFigures(attempts=attempts, durations=durations, buckets=buckets)
