"""What deliveries tell the apps above them; those connect their receivers in their
`AppConfig.ready()`.

The dead-letter queue sits above deliveries (its models point at theirs), so recording
cannot call it: it sends `deliveries_died` and `dlq` parks the dead deliveries.

Inside deliveries the rooms use the same means where an arrow would point the wrong way
(LAYOUT.md): lifecycle announces operational events, which intake ingests, and the
endpoints a batch heard from, whose in-flight ramp the worker's concurrency grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.dispatch import Signal

from deliveries.lifecycle.in_hand import InHand
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


# Sent inside the transaction that deletes `delivery_ids` (their endpoint is being deleted),
# before the delete. The dead-letter queue deletes their letters: a letter's foreign key
# to its delivery follows no deletion, as retention drops history under waiting letters.
deliveries_deleting = Signal()


def deliveries_deleting_send(*, delivery_ids: Sequence[str]) -> None:
    deliveries_deleting.send(sender=Delivery, delivery_ids=delivery_ids)


# Sent after a batch of attempts (or an endpoint's deactivation) committed, with `events`:
# `lifecycle.health.Operational` items, news for the tenants (`homing.*`). Intake connects
# the receiver that ingests them (intake/operational.py).
operational_events = Signal()

# Sent after a batch of attempts committed, with `recovered` (endpoints whose circuit the
# batch closed) and `succeeded` (endpoints with a success in it). The worker's concurrency
# connects the ramp that grows their in-flight cap back (worker/concurrency.py).
endpoints_answered = Signal()


def operational_events_send(*, events: Sequence[Any]) -> None:
    if events:
        operational_events.send(sender=Delivery, events=events)


def endpoints_answered_send(*, recovered: Sequence[str], succeeded: Sequence[str]) -> None:
    if recovered or succeeded:
        endpoints_answered.send(sender=Delivery, recovered=recovered, succeeded=succeeded)
