"""Writing to the outbox, and the figure that tells whether the relay keeps up."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, connections, router, transaction
from django.db.models import F
from django.utils import timezone

from homing_client.django.models import OutboxEvent, OutboxKey

# The PostgreSQL channel a relay LISTENs on; NOTIFY is delivered only on commit.
CHANNEL = "homing_outbox"
# Homing's own rule for event types (CONTRACT section 2): refuse early, not at relay time.
EVENT_TYPE = re.compile(r"[A-Za-z0-9_.:-]{1,255}")
ORDERING_KEY = re.compile(r"[^\x00-\x1f\x7f-\x9f]{1,255}")


def publish_on_commit(
    type: str,
    data: Mapping[str, Any],
    *,
    ordering_key: str | None = None,
    using: str | None = None,
) -> str:
    """Write an outbox row in the current transaction and return its id.

    The row becomes visible to the relay when the caller's transaction commits, and
    disappears with it when it rolls back, so Homing hears of exactly the events whose
    transaction committed. Data that JSON cannot carry raises TypeError (ValueError for
    NaN, Infinity or cycles) here, in the caller, not later in the relay.

    Rows with one `ordering_key` reach Homing in the order their transactions committed
    (the key's counter row stays locked until this transaction ends, so a concurrent
    writer of the same key waits for it), and Homing delivers them in that order.
    """
    if not isinstance(type, str) or not EVENT_TYPE.fullmatch(type):
        raise ValueError(f"event type must be 1-255 characters of [A-Za-z0-9_.:-], got {type!r}")
    if not isinstance(data, Mapping):
        raise TypeError(
            f"event data must be a JSON object (a mapping), got {data.__class__.__name__}"
        )
    if ordering_key is not None and not (
        isinstance(ordering_key, str) and ORDERING_KEY.fullmatch(ordering_key)
    ):
        raise ValueError(f"ordering_key must be 1-255 printable characters, got {ordering_key!r}")
    # Round-trip now: what is stored is exactly what JSON can carry to Homing.
    data = json.loads(json.dumps(data, allow_nan=False))
    alias = using or router.db_for_write(OutboxEvent)
    with transaction.atomic(using=alias):
        key_sequence = _next_key_sequence(ordering_key, alias) if ordering_key else None
        row = OutboxEvent.objects.using(alias).create(
            type=type,
            data=data,
            ordering_key=ordering_key,
            key_sequence=key_sequence,
            created_at=timezone.now(),  # after the key's lock: later rows of it sort later
        )
    connection = connections[alias]
    if connection.vendor == "postgresql":
        # Sent in the caller's transaction: relays wake on commit, never on rollback.
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {CHANNEL}")
    return row.id


def _next_key_sequence(key: str, alias: str) -> int:
    """The key's next number; its OutboxKey row stays locked until the transaction ends."""
    keys = OutboxKey.objects.using(alias)
    if not keys.filter(key=key).update(last=F("last") + 1):
        try:
            with transaction.atomic(using=alias):
                keys.create(key=key, last=1)
            return 1
        except IntegrityError:  # a concurrent first writer of the key: count after it
            keys.filter(key=key).update(last=F("last") + 1)
    return keys.filter(key=key).values_list("last", flat=True).get()


def oldest_pending_age_seconds(*, using: str | None = None) -> float:
    """Age of the oldest row not yet sent, in seconds (0.0 when none is waiting).

    Export it as e.g. ``homing_outbox_oldest_age_seconds``: a figure that only grows
    means no relay is running or Homing has been unreachable for that long.
    """
    alias = using or router.db_for_read(OutboxEvent)
    oldest = (
        OutboxEvent.objects.using(alias)
        .filter(status=OutboxEvent.Status.PENDING)
        .order_by("created_at", "id")
        .values_list("created_at", flat=True)
        .first()
    )
    if oldest is None:
        return 0.0
    return max(0.0, (timezone.now() - oldest).total_seconds())
