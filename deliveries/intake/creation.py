from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.clock import database_now
from core.ids import new_id
from core.postgresql.prepared import text_array
from deliveries.intake.sequences import counters_upsert_sql, sequences_numbered, sequences_take
from deliveries.lifecycle.ordering import deliveries_line_up
from deliveries.models import Delivery
from deliveries.wakeups import publish_deliveries_on_commit
from webhooks.models import Endpoint, Event

# Every column of Delivery, in the order deliveries_insert_statement fills them.
DELIVERY_COLUMNS = (
    "id", "tenant_id", "event_id", "endpoint_id", "status", "attempt_count", "schedule_offset",
    "next_attempt_at", "lease_expires_at", "last_error", "created_at", "updated_at", "sequence",
    "ordering_key", "blocked_by", "head_since",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A delivery as ingestion makes it: pending and due at once. Plain data rather than
    a model instance: a batch of 1,000 events built that many `Delivery` objects, a fifth
    of the web process's CPU per batch."""

    id: str
    event_id: str
    endpoint_id: str
    sequence: int = 0  # 0 until the statement that saves it has numbered it
    status: str = Delivery.Status.PENDING.value


def deliveries_create_for_event(*, event: Event, endpoints: Iterable[Endpoint]) -> list[Delivery]:
    """One pending delivery per endpoint, due now, published when the transaction commits."""
    return deliveries_create_for_events(fan_out=[(event, list(endpoints))])[0]


def deliveries_create_for_events(
    *, fan_out: Sequence[tuple[Event, Sequence[Endpoint]]]
) -> list[list[Delivery]]:
    """Each event's deliveries (in order) from one multi-row INSERT and one wake-up; call
    it in a transaction (the deliveries' sequence numbers are reserved in it)."""
    now = database_now()
    per_event = [
        [
            Delivery(
                tenant_id=event.tenant_id,
                event=event,
                endpoint_id=endpoint.pk,
                next_attempt_at=now,
                created_at=now,
                updated_at=now,
            )
            for endpoint in endpoints
        ]
        for event, endpoints in fan_out
    ]
    every = [delivery for deliveries in per_event for delivery in deliveries]
    numbers = sequences_take([delivery.endpoint_id for delivery in every])
    for delivery, number in zip(every, numbers, strict=True):
        delivery.sequence = number
    deliveries_line_up(every, [delivery.event.ordering_key for delivery in every])
    Delivery.objects.bulk_create(every)
    publish_deliveries_on_commit(
        [delivery.id for delivery in every if delivery.status == Delivery.Status.PENDING]
    )
    return per_event


def deliveries_build(*, fan_out: Iterable[tuple[str, Iterable[str]]]) -> list[list[NewDelivery]]:
    """For each (event id, endpoint ids), that event's deliveries, not saved yet."""
    return [
        [NewDelivery(new_id("dlv"), event_id, endpoint_id) for endpoint_id in endpoint_ids]
        for event_id, endpoint_ids in fan_out
    ]


def deliveries_numbered(
    per_event: list[list[NewDelivery]], last: Mapping[str, int]
) -> list[list[NewDelivery]]:
    """The deliveries with the numbers `deliveries_insert_ctes` gave them, from each
    endpoint's last number (what its statement returns)."""
    numbers = iter(
        sequences_numbered([d.endpoint_id for deliveries in per_event for d in deliveries], last)
    )
    return [
        [NewDelivery(d.id, d.event_id, d.endpoint_id, next(numbers)) for d in deliveries]
        for deliveries in per_event
    ]


def deliveries_insert_ctes(
    deliveries: Sequence[NewDelivery], *, tenant_id: str, now: datetime, after: str
) -> tuple[str, list[Any]]:
    """Entries of a WITH list (for events without an ordering key): `new_rows`, the
    deliveries as rows; `sequences`, which reserves their numbers (endpoint_id, last:
    what `deliveries_numbered` needs); and `new_deliveries`, the
    INSERT of these deliveries of one tenant, due `now` — for ingestion to run in one
    statement with its events (it publishes them itself once they are committed).

    `after` names an earlier entry of the WITH list (an INSERT ... RETURNING: the
    events) that is written in full before the counters are taken. A counter row stays
    locked from its upsert to the commit, and every other creator for its endpoint waits
    for it (100 producers posting to one endpoint queue on it): the less the statement
    does after the upsert, the shorter that wait. What must follow it (the deliveries,
    which carry its numbers, their foreign keys checked at commit, the commit) does.

    A fixed number of parameters however many rows: ids as text array literals (psycopg
    binds a list element by element in Python, text_array says why), the rest shared,
    so the statement text is the same for 1 or 10,000 deliveries and no value goes
    through the model's fields one by one (for a batch of 100 events that walk, and
    psycopg parsing 1,100 placeholders, were most of the web process's CPU)."""
    return _deliveries_insert_sql(after), [
        text_array([d.id for d in deliveries]),
        text_array([d.event_id for d in deliveries]),
        text_array([d.endpoint_id for d in deliveries]),
        tenant_id,
        Delivery.Status.PENDING.value,
        now,
        now,
        now,
    ]


@functools.cache  # the same text every time: made once (it was ~2% of a single POST's CPU)
def _deliveries_insert_sql(after: str) -> str:
    table = Delivery._meta.db_table  # names from the model, values all bound: no input in SQL
    # Each endpoint's deliveries number up to its new `last`, in the order listed here
    # (as sequences_numbered does): d.n is the position in the list.
    return (
        "new_rows AS (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) "  # noqa: S608
        "WITH ORDINALITY AS d(id, event_id, endpoint_id, n) "
        # Counted (not EXISTS, which would stop at its first row): `after` runs to its end
        # before the first row of new_rows, so before the upsert reading them.
        f"WHERE (SELECT count(*) FROM {after}) > 0), "
        f"sequences AS ({counters_upsert_sql('new_rows')}), new_deliveries AS ("
        f"INSERT INTO {table} ({', '.join(DELIVERY_COLUMNS)}) "
        "SELECT d.id, %s, d.event_id, d.endpoint_id, %s, 0, 0, %s, NULL, '', %s, %s, "
        "s.last - count(*) OVER (PARTITION BY d.endpoint_id) "
        "+ row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.n), NULL, NULL, NULL "
        "FROM new_rows AS d JOIN sequences s USING (endpoint_id))"
    )
