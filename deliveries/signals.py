"""What deliveries tell the apps above them; those connect their receivers in their
`AppConfig.ready()`.

The dead-letter queue sits above deliveries (its models point at theirs), so recording
cannot call it: it sends `deliveries_died` and `dlq` parks the dead deliveries.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.dispatch import Signal

from deliveries.in_hand import InHand
from deliveries.models import Delivery

# Sent inside the transaction that moved deliveries to `dead`, with `deliveries` (each with
# its ids and `event.type`), `reasons` (one each) and `dead_at`. Receivers write in that
# transaction: if one fails, the deaths roll back with it.
deliveries_died = Signal()


def deliveries_died_send(
    *, deliveries: Sequence[InHand], reasons: Sequence[str], dead_at: datetime
) -> None:
    """Hand deliveries that gave up to the dead-letter queue. Raises if no app listens: a
    `dead` delivery without its dead letter would be in no queue at all."""
    answered = deliveries_died.send(
        sender=Delivery, deliveries=deliveries, reasons=reasons, dead_at=dead_at
    )
    if not answered:
        raise RuntimeError("nothing receives deliveries_died: is the dlq app installed?")
