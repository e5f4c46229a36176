from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from deliveries.lifecycle.in_hand import InHand
from deliveries.log_context import delivery_log_context
from dlq.models import DeadLetter

logger = logging.getLogger(__name__)


def dead_letters_create(
    *, deliveries: Sequence[InHand], reasons: Sequence[str], dead_at: datetime
) -> None:
    """Park deliveries that gave up; `reasons[i]` says why `deliveries[i]` died."""
    DeadLetter.objects.bulk_create(
        DeadLetter(
            tenant_id=delivery.tenant_id,
            delivery_id=delivery.id,
            event_id=delivery.event_id,
            endpoint_id=delivery.endpoint_id,
            event_type=delivery.event.type,
            reason=reason,
            dead_at=dead_at,
        )
        for delivery, reason in zip(deliveries, reasons, strict=True)
    )
    # Once it is true: a rolled-back death is not one. An operator finds each dead
    # delivery in the logs by any of its ids (CONTRACT section 5).
    deaths = [
        (delivery_log_context(d), reason) for d, reason in zip(deliveries, reasons, strict=True)
    ]
    transaction.on_commit(lambda: _log_deaths(deaths))


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


def _log_deaths(deaths: list[tuple[dict[str, str], str]]) -> None:
    for ids, reason in deaths:
        logger.warning("delivery %s is dead: %s", ids["delivery_id"], reason, extra=ids)
