"""Ordering keys: to each endpoint, the deliveries of one key go one at a time, in order.

The deliveries of a key at an endpoint form a line, in sequence (commit) order. Only
the first is `pending`, and is sent under every usual rule (rate limits, circuits,
retries); each later one is created `held`, with `blocked_by` naming the delivery just
before it. A held delivery is outside every due index, so waiting costs nothing. The
transaction that finishes a delivery (succeeded or dead) releases the one it blocks.

Creating and finishing cannot miss each other: a creator reads the line's last
delivery after taking the endpoint's sequence counter (services/sequences.py: no
other creator for the endpoint until it commits), and locks that delivery FOR SHARE
until it commits, so its finisher, which updates the row, waits for it and then sees
the new delivery to release. A killed worker's attempt comes back through the lease
sweep: the head may be sent twice, never overtaken.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from core.durations import duration_text
from deliveries.lifecycle.record_sql import LINE_ENDS
from deliveries.models import Delivery
from deliveries.statuses import UNFINISHED
from deliveries.wakeups import publish_deliveries_on_commit


def line_ends(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """For each (endpoint id, ordering key), the id of its line's last unfinished
    delivery, if any. Call it in the creating transaction, after taking the endpoints'
    sequence numbers (so that no other creator for them runs until it commits)."""
    wanted = sorted(set(pairs))
    if not wanted:
        return {}
    if connection.vendor != "postgresql":  # SQLite: one writer at a time, no row locks
        ends = {}
        for endpoint_id, key in wanted:
            last = (
                Delivery.objects.filter(
                    endpoint_id=endpoint_id, ordering_key=key, status__in=UNFINISHED
                )
                .order_by("-sequence")
                .values_list("id", flat=True)
                .first()
            )
            if last is not None:
                ends[endpoint_id, key] = last
        return ends
    with connection.cursor() as cursor:
        cursor.execute(
            LINE_ENDS, {"endpoint_ids": [e for e, _ in wanted], "keys": [k for _, k in wanted]}
        )
        return {(endpoint_id, key): last for endpoint_id, key, last in cursor.fetchall()}


def deliveries_line_up(deliveries: Sequence[Delivery], keys: Sequence[str | None]) -> None:
    """Put each new delivery (in sequence order) at the end of its key's line: held
    behind the line's last one, or first (pending, due now) in an empty line."""
    keyed = [(d, k) for d, k in zip(deliveries, keys, strict=True) if k is not None]
    ends = line_ends((d.endpoint_id, k) for d, k in keyed)
    for delivery, key in keyed:
        delivery.ordering_key = key
        before = ends.get((delivery.endpoint_id, key))
        if before is None:
            delivery.head_since = delivery.next_attempt_at
        else:
            delivery.status = Delivery.Status.HELD
            delivery.blocked_by = before
            delivery.next_attempt_at = None
        ends[delivery.endpoint_id, key] = delivery.id


def deliveries_release_next(*, finished: Sequence[str], now: datetime) -> list[str]:
    """Make due the deliveries that waited for these finished ones; in the finishing
    transaction. Returns their ids (published when it commits)."""
    if not finished:
        return []
    released = list(
        Delivery.objects.filter(status=Delivery.Status.HELD, blocked_by__in=finished).values_list(
            "id", flat=True
        )
    )
    if released:
        Delivery.objects.filter(pk__in=released, status=Delivery.Status.HELD).update(
            status=Delivery.Status.PENDING,
            blocked_by=None,
            next_attempt_at=now,
            head_since=now,
            updated_at=now,
        )
        publish_deliveries_on_commit(released)
    return released


def delivery_leave_line(*, delivery: Delivery) -> dict[str, Any]:
    """The fields that take a delivery out of its key's line when a replay or "Retry
    now" sends it at once: it blocks its key no more. One that waited in the line
    leaves its place to the one behind it, which now waits for what it waited for.
    (The first of a line is already sendable: it stays where it is.)"""
    if delivery.ordering_key is None or delivery.status in (
        Delivery.Status.PENDING,
        Delivery.Status.DELIVERING,
    ):
        return {}
    if delivery.status == Delivery.Status.HELD:
        Delivery.objects.filter(status=Delivery.Status.HELD, blocked_by=delivery.pk).update(
            blocked_by=delivery.blocked_by
        )
    return {"ordering_key": None, "blocked_by": None, "head_since": None}


def max_block_verdict(
    *, head_since: datetime | None, now: datetime, due: datetime, max_block: float
) -> tuple[datetime, str | None]:
    """A failing line head's next due time, never past its HOMING_ORDERING_MAX_BLOCK,
    or the reason it dies now: `blocked its ordering key for 1h`."""
    if head_since is None:
        return due, None
    deadline = head_since + timedelta(seconds=max_block)
    if now >= deadline:
        return due, f"blocked its ordering key for {duration_text(max_block)}"
    return min(due, deadline), None
