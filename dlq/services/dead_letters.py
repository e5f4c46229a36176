from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from core.ids import new_id
from deliveries.lifecycle.in_hand import InHand
from deliveries.log_context import delivery_log_context
from deliveries.models import Delivery
from dlq.models import DeadLetter

logger = logging.getLogger(__name__)

# PostgreSQL: the letters of one batch of deaths in one statement, each with what it keeps
# of its delivery's and event's rows copied inside the database. Parking an endpoint's
# 50,000-deep backlog read every event's payload into Python and wrote it back, once per
# letter (1.4x the time of parking without them).
INSERT_KEPT = """
INSERT INTO dlq_deadletter (
    id, tenant_id, delivery_id, event_id, endpoint_id, event_type, reason, dead_at,
    sequence, attempt_count, delivery_created_at,
    event_data, event_created_at, event_ordering_key, event_trace_context
)
SELECT v.id, v.tenant_id, v.delivery_id, v.event_id, v.endpoint_id, v.event_type, v.reason,
    %(dead_at)s, d.sequence, d.attempt_count, d.created_at,
    e.data, e.created_at, e.ordering_key, e.trace_context
FROM unnest(
    %(ids)s::text[], %(tenant_ids)s::text[], %(delivery_ids)s::text[], %(event_ids)s::text[],
    %(endpoint_ids)s::text[], %(event_types)s::text[], %(reasons)s::text[]
) AS v(id, tenant_id, delivery_id, event_id, endpoint_id, event_type, reason)
LEFT JOIN deliveries_delivery d ON d.id = v.delivery_id
LEFT JOIN webhooks_event e ON e.id = d.event_id
"""


def dead_letters_create(
    *, deliveries: Sequence[InHand], reasons: Sequence[str], dead_at: datetime
) -> None:
    """Park deliveries that gave up; `reasons[i]` says why `deliveries[i]` died. Each
    letter keeps what a replay re-creates its history from (kept_history.py)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                INSERT_KEPT,
                {
                    "dead_at": dead_at,
                    "ids": [new_id("dl") for _ in deliveries],
                    "tenant_ids": [d.tenant_id for d in deliveries],
                    "delivery_ids": [d.id for d in deliveries],
                    "event_ids": [d.event_id for d in deliveries],
                    "endpoint_ids": [d.endpoint_id for d in deliveries],
                    "event_types": [d.event.type for d in deliveries],
                    "reasons": list(reasons),
                },
            )
    else:
        _letters_create(deliveries, reasons, dead_at)
    # Once it is true: a rolled-back death is not one. An operator finds each dead
    # delivery in the logs by any of its ids (CONTRACT section 5).
    deaths = [
        (delivery_log_context(d), reason) for d, reason in zip(deliveries, reasons, strict=True)
    ]
    transaction.on_commit(lambda: _log_deaths(deaths))


def _letters_create(
    deliveries: Sequence[InHand], reasons: Sequence[str], dead_at: datetime
) -> None:
    """INSERT_KEPT through the ORM (SQLite)."""
    kept = _history_of([delivery.id for delivery in deliveries])
    DeadLetter.objects.bulk_create(
        DeadLetter(
            tenant_id=delivery.tenant_id,
            delivery_id=delivery.id,
            event_id=delivery.event_id,
            endpoint_id=delivery.endpoint_id,
            event_type=delivery.event.type,
            reason=reason,
            dead_at=dead_at,
            **kept.get(delivery.id, {}),
        )
        for delivery, reason in zip(deliveries, reasons, strict=True)
    )


def _history_of(delivery_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The DeadLetter fields of each delivery's row and its event's, read in the death's
    transaction: one query (the sweep and parking hold no event data)."""
    rows = Delivery.objects.filter(pk__in=delivery_ids).values_list(
        "pk",
        "sequence",
        "attempt_count",
        "created_at",
        "event__data",
        "event__created_at",
        "event__ordering_key",
        "event__trace_context",
    )
    return {
        pk: {
            "sequence": sequence,
            "attempt_count": attempts,
            "delivery_created_at": created_at,
            "event_data": data,
            "event_created_at": event_created_at,
            "event_ordering_key": ordering_key,
            "event_trace_context": trace_context,
        }
        for (
            pk,
            sequence,
            attempts,
            created_at,
            data,
            event_created_at,
            ordering_key,
            trace_context,
        ) in rows
    }


def deliveries_died_received(
    sender: object,
    *,
    deliveries: Sequence[InHand],
    reasons: Sequence[str],
    dead_at: datetime,
    **_: object,
) -> None:
    """The receiver of deliveries.signals.deliveries_died (connected in dlq/apps.py)."""
    dead_letters_create(deliveries=deliveries, reasons=reasons, dead_at=dead_at)


def deliveries_deleting_received(
    sender: object, *, delivery_ids: Sequence[str], **_: object
) -> None:
    """The receiver of deliveries.signals.deliveries_deleting (connected in dlq/apps.py):
    an endpoint being deleted takes its dead letters with its deliveries, batch by batch."""
    DeadLetter.objects.filter(delivery_id__in=delivery_ids).delete()


def _log_deaths(deaths: list[tuple[dict[str, str], str]]) -> None:
    for ids, reason in deaths:
        logger.warning("delivery %s is dead: %s", ids["delivery_id"], reason, extra=ids)
