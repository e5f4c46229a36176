from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from deliveries.models import Delivery
from deliveries.services.claims import Claimed
from dlq.models import DeadLetter


def dead_letters_create(
    *, deliveries: Sequence[Delivery | Claimed], reasons: Sequence[str], dead_at: datetime
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
