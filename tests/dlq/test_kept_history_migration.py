"""Migration dlq/0004 fills what the dead letters already there keep of their history."""

from __future__ import annotations

import importlib

from django.utils import timezone

from dlq.models import DeadLetter
from tests.migrations import latest, migrate

BEFORE = [
    ("dlq", "0002_discard_and_replay_jobs"),
    ("deliveries", "0012_history_without_cross_table_constraints"),
]
FILL = importlib.import_module("dlq.migrations.0004_dead_letters_fill_kept_history")


def test_existing_dead_letters_keep_their_history_batch_by_batch(transactional_db, monkeypatch):
    monkeypatch.setattr(FILL, "BATCH", 2)
    # Every other app as it is now, dlq before 0003 (and so history not yet partitioned:
    # the conversion waits for the dead letters to keep what they need).
    old = migrate([node for node in latest() if node[0] not in ("dlq", "deliveries")] + BEFORE)
    tenant = old.get_model("webhooks", "Tenant").objects.create(id="ten_k", name="k")
    endpoint = old.get_model("webhooks", "Endpoint").objects.create(
        id="ep_k", tenant=tenant, url="https://example.com/h", secret="x"
    )
    old_event = old.get_model("webhooks", "Event")
    old_delivery = old.get_model("deliveries", "Delivery")
    for n in range(3):
        event = old_event.objects.create(
            id=f"evt_k{n}",
            tenant=tenant,
            type="a.b",
            data={"n": n, "ü": [1.5, None]},
            ordering_key="key" if n == 1 else None,
            trace_context=f"00-{n:032x}-{n + 1:016x}-01" if n == 2 else None,
        )
        delivery = old_delivery.objects.create(
            id=f"dlv_k{n}",
            tenant=tenant,
            event=event,
            endpoint=endpoint,
            status="dead",
            attempt_count=n + 1,
            sequence=n + 1,
        )
        old.get_model("dlq", "DeadLetter").objects.create(
            id=f"dl_k{n}",
            tenant=tenant,
            delivery=delivery,
            event=event,
            endpoint=endpoint,
            event_type="a.b",
            reason="HTTP 503",
            dead_at=timezone.now(),
        )
    events = {e.id: e for e in old_event.objects.all()}
    deliveries = {d.id: d for d in old_delivery.objects.all()}

    migrate(latest())

    letters = DeadLetter.objects.order_by("pk")
    assert all(letter.kept for letter in letters)
    for n, letter in enumerate(letters):
        event, delivery = events[f"evt_k{n}"], deliveries[f"dlv_k{n}"]
        assert (letter.sequence, letter.attempt_count) == (n + 1, n + 1)
        assert letter.delivery_created_at == delivery.created_at
        assert (letter.event_data, letter.event_created_at) == (event.data, event.created_at)
        assert letter.event_ordering_key == event.ordering_key
        assert letter.event_trace_context == event.trace_context
