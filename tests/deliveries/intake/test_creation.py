"""Deliveries inserted in one statement with their events (the ingestion fast path)."""

from __future__ import annotations

from django.db import connection

from deliveries.models import Delivery

# That the insert names every column of a delivery: tests/deliveries/intake/test_ingest_sql.py


def test_events_and_their_deliveries_are_written_as_the_orm_would(alice) -> None:
    for n in range(3):
        alice.client.post("/api/v1/endpoints", {"url": f"http://127.0.0.1:9/{n}"}, format="json")
    batch = [{"type": "a.b", "data": {"n": n}} for n in range(50)]
    answer = alice.client.post("/api/v1/events/batch", {"events": batch}, format="json")
    assert answer.status_code == 202
    rows = Delivery.objects.filter(tenant=alice.tenant)
    assert rows.count() == 150
    assert set(rows.values_list("status", "attempt_count", "schedule_offset", "last_error")) == {
        ("pending", 0, 0, "")
    }
    assert rows.filter(lease_expires_at__isnull=True, next_attempt_at__isnull=False).count() == 150
    assert connection.vendor == "postgresql"  # the one-statement path is what ran
