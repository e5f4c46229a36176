"""The event and delivery of a dead letter, re-created from what the letter kept when
retention dropped their rows (DESIGN.md 25, CONTRACT section 1).

A replay calls `history_restore` first, in its own transaction: the rows come back with
their original ids, sequence, data and creation times, the delivery still `dead`, and the
replay then moves it to `pending` as it does any dead delivery. So the webhook that goes
out has the same `webhook-id` (the event id), `homing-sequence` and body bytes (built from
the event's id, type, created_at and data) as the attempts before the drop.

Two replays of one letter at once: the inserts skip a row that exists (ON CONFLICT DO
NOTHING, waiting for the other transaction's uncommitted row), and the replay's
`status = dead` condition leaves the second with nothing to do.

A replay and retention's DROP at once: the check of what is left, the restore and the
replay's update run in ONE transaction, and its first read of the history tables holds
their parents' ACCESS SHARE lock to commit; the drop's ACCESS EXCLUSIVE (partitions.py)
waits for it and then sees the delivery pending (kept). A drop that locked first makes
the replay wait and then find the rows gone. Checking in a transaction of its own and
replaying in another would let a drop in between (tests/dlq/test_replay_drop_race.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from deliveries.models import Delivery
from dlq.models import DeadLetter
from webhooks.models import Event


def history_restore(*, letters: Sequence[DeadLetter]) -> int:
    """Re-create the missing event and delivery rows of `letters`; how many rows."""
    kept = [letter for letter in letters if letter.kept]
    if not kept:
        return 0
    events_there = set(
        Event.objects.filter(pk__in={x.event_id for x in kept}).values_list("pk", flat=True)
    )
    deliveries_there = set(
        Delivery.objects.filter(pk__in={x.delivery_id for x in kept}).values_list("pk", flat=True)
    )
    # One each, whatever the number of letters naming it (a delivery that died twice).
    events = {x.event_id: x for x in kept if x.event_id not in events_there}
    deliveries = {x.delivery_id: x for x in kept if x.delivery_id not in deliveries_there}
    Event.objects.bulk_create(map(kept_event, events.values()), ignore_conflicts=True)
    Delivery.objects.bulk_create(map(kept_delivery, deliveries.values()), ignore_conflicts=True)
    # `auto_now_add` wrote the present on insert: the original times go back, the event's
    # being in every body ("timestamp").
    for pk, letter in events.items():
        Event.objects.filter(pk=pk).update(created_at=letter.event_created_at)
    for pk, letter in deliveries.items():
        Delivery.objects.filter(pk=pk).update(
            created_at=letter.delivery_created_at or letter.event_created_at
        )
    return len(events) + len(deliveries)


def kept_event(letter: DeadLetter) -> Event:
    """The letter's event as it was (unsaved); `letter.kept` must be true."""
    assert letter.event_created_at is not None
    return Event(
        id=letter.event_id,
        tenant_id=letter.tenant_id,
        type=letter.event_type,
        data=letter.event_data,
        ordering_key=letter.event_ordering_key,
        created_at=letter.event_created_at,
        trace_context=letter.event_trace_context,
    )


def kept_delivery(letter: DeadLetter) -> Delivery:
    """The letter's delivery as it was when it died (unsaved): `dead`, its attempts
    counted (a new attempt's number follows them, whatever attempt rows remain);
    `letter.kept` must be true."""
    assert letter.event_created_at is not None and letter.sequence is not None
    attempts = letter.attempt_count or 0
    return Delivery(
        id=letter.delivery_id,
        tenant_id=letter.tenant_id,
        event_id=letter.event_id,
        endpoint_id=letter.endpoint_id,
        status=Delivery.Status.DEAD,
        attempt_count=attempts,
        schedule_offset=attempts,
        next_attempt_at=None,
        last_error=letter.reason,
        sequence=letter.sequence,
        created_at=letter.delivery_created_at or letter.event_created_at,
        updated_at=letter.dead_at,
    )
