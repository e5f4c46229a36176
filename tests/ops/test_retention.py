"""The retention purge in-process: which rows go, and that every statement it runs is
served by an index (EXPLAIN with sequential scans priced out)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deliveries.models import SequenceCounter
from dlq.services.retention import retention_purge
from tests.factories import delivery_row, endpoint_row
from webhooks.models import Event, IdempotencyRecord
from webhooks.services.tenants import tenant_create


@pytest.fixture
def ep(db):
    tenant, _ = tenant_create(name="Acme")
    return endpoint_row(tenant)


def test_it_purges_in_batches_and_keeps_what_is_not_finished(ep):
    for _ in range(7):
        delivery_row(ep, "succeeded", age_days=40)
    kept = delivery_row(ep, "delivering", age_days=40)
    progress = []

    report = retention_purge(batch_size=3, progress=lambda r: progress.append(r.events))

    assert report.events == 7 and report.deliveries == 7 and report.attempts == 7
    assert progress == [3, 6, 7]  # the last batch: one purged, the delivering one held
    assert list(Event.objects.values_list("id", flat=True)) == [kept.event_id]


def test_it_purges_expired_idempotency_records(ep):
    now = timezone.now()
    for hours in (-2, -1, 5):
        IdempotencyRecord.objects.create(
            tenant=ep.tenant,
            key=f"k{hours}",
            request_hash="x",
            status="completed",
            response_status=202,
            response_body=b"{}",
            created_at=now,
            expires_at=now + timedelta(hours=hours),
        )

    report = retention_purge(batch_size=1)

    assert report.idempotency_records == 2
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["k5"]


def test_every_purge_statement_uses_an_index(ep):
    delivery_row(ep, "succeeded", age_days=40)
    delivery_row(ep, "dead", age_days=40, dead_letter="replayed")
    delivery_row(ep, "dead", age_days=40, dead_letter="waiting")
    IdempotencyRecord.objects.create(
        tenant=ep.tenant,
        key="old",
        request_hash="x",
        status="completed",
        response_status=202,
        response_body=b"{}",
        created_at=timezone.now(),
        # Expired a while ago: the purge reads the database's clock, whose measured
        # offset from this process's may be a few milliseconds off either way.
        expires_at=timezone.now() - timedelta(seconds=5),
    )
    with CaptureQueriesContext(connection) as captured:
        report = retention_purge(batch_size=2)
    assert report.events == 2 and report.idempotency_records == 1

    statements = [
        q["sql"] for q in captured.captured_queries if q["sql"].startswith(("SELECT", "DELETE"))
    ]
    assert any(s.startswith("DELETE") for s in statements)
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # a usable index always wins now
        try:
            for sql in statements:
                cursor.execute(f"EXPLAIN {sql}")
                plan = "\n".join(row[0] for row in cursor.fetchall())
                assert "Seq Scan" not in plan, f"{sql}\n{plan}"
        finally:
            cursor.execute("RESET enable_seqscan")


def test_each_batch_moves_the_feed_boundary_last_after_its_deletes(ep):
    """POST /events locks its endpoints' counter rows until it commits: a purge batch
    that took them first held ingestion for all its deletes (issue #35, item 5)."""
    other = endpoint_row(ep.tenant)
    for endpoint in (ep, other, ep, other):
        delivery_row(endpoint, "succeeded", age_days=40)
    counters = f'UPDATE "{SequenceCounter._meta.db_table}"'

    with CaptureQueriesContext(connection) as captured:
        report = retention_purge(batch_size=2)

    assert report.deliveries == 4
    writes = [
        "counter" if q["sql"].startswith(counters) else "delete"
        for q in captured.captured_queries
        if q["sql"].startswith(("UPDATE", "DELETE"))
    ]
    # Per batch (one delivery of each endpoint): every DELETE, then both counters.
    runs = [kind for n, kind in enumerate(writes) if n == 0 or writes[n - 1] != kind]
    assert runs == ["delete", "counter", "delete", "counter"]
    assert writes.count("counter") == 4
    assert dict(SequenceCounter.objects.values_list("endpoint_id", "purged_through")) == {
        ep.pk: 2,
        other.pk: 2,
    }


def test_a_time_budget_stops_between_batches(ep):
    for _ in range(4):
        delivery_row(ep, "succeeded", age_days=40)

    first = retention_purge(batch_size=1, time_budget=0)
    rest = retention_purge(batch_size=1)

    assert (first.events, first.complete) == (1, False)
    assert (rest.events, rest.complete) == (3, True)


def test_it_purges_endpoint_statistics_minutes_older_than_a_week(db):
    from deliveries.models import EndpointMinute

    now = timezone.now().replace(second=0, microsecond=0)
    ages = [timedelta(days=9), timedelta(days=8), timedelta(days=6, hours=23), timedelta(0)]
    for age in ages:  # made oldest first, as recording makes them
        EndpointMinute.objects.create(endpoint_id="ep_shop", minute=now - age, success=1)

    retention_purge(dry_run=True)
    assert EndpointMinute.objects.count() == 4  # a dry run deletes nothing
    retention_purge()

    kept = sorted(now - row.minute for row in EndpointMinute.objects.all())
    assert kept == [timedelta(0), timedelta(days=6, hours=23)]
