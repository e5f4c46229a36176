"""A delivery in hand: the one shape every part that moves a delivery reads.

A claim (worker/claims.py) hands the worker `Claimed`: this, with the endpoint loaded
for its attempt. The scheduler's lease sweep (`worker lost`) and parking a deactivated
endpoint's backlog build the plain `InHand` from the columns they load (no event data).
Recording, the dead-letter queue and the worker's ledger read nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deliveries.models import Delivery


@dataclass(frozen=True, slots=True)
class EventInHand:
    id: str
    type: str
    data: Any  # None where it was not loaded (the sweep, parking)
    created_at: datetime
    trace_context: str | None = None  # Event.trace_context, where it was loaded (a claim)


@dataclass(frozen=True, slots=True, kw_only=True)
class InHand:
    id: str
    tenant_id: str
    endpoint_id: str
    event: EventInHand
    attempt_count: int = 0  # the number of the attempt its claim makes (the lease's fence)
    schedule_offset: int = 0
    sequence: int = 0  # the `homing-sequence` header
    ordering_key: str | None = None  # in its key's line (services/ordering.py)
    head_since: datetime | None = None  # first of that line since

    @property
    def event_id(self) -> str:
        return self.event.id

    @property
    def attempts_in_schedule(self) -> int:
        return self.attempt_count - self.schedule_offset


def in_hand_of(delivery: Delivery) -> InHand:
    """A delivery row (with its event loaded) as a delivery in hand."""
    event = delivery.event
    return InHand(
        id=delivery.id,
        tenant_id=delivery.tenant_id,
        endpoint_id=delivery.endpoint_id,
        event=EventInHand(event.id, event.type, event.data, event.created_at, event.trace_context),
        attempt_count=delivery.attempt_count,
        schedule_offset=delivery.schedule_offset,
        sequence=delivery.sequence,
        ordering_key=delivery.ordering_key,
        head_since=delivery.head_since,
    )
