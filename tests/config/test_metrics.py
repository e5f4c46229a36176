from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from config import gauges
from core import counters
from core.redis import redis_client
from deliveries.models import Delivery
from dlq import selectors
from dlq.models import DeadLetter


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} missing from:\n{text}"
    return float(match.group(1))


def test_metrics_expose_counters_and_queue_gauges(alice):
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    events = [
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
        for _ in range(3)
    ]
    deliveries = [Delivery.objects.get(pk=e["deliveries"][0]["id"]) for e in events]
    now = timezone.now()
    Delivery.objects.filter(pk=deliveries[0].pk).update(next_attempt_at=now - timedelta(seconds=7))
    Delivery.objects.filter(pk=deliveries[1].pk).update(status="dead", next_attempt_at=None)
    DeadLetter.objects.create(
        tenant=alice.tenant,
        delivery=deliveries[1],
        event_id=events[1]["id"],
        endpoint_id=deliveries[1].endpoint_id,
        event_type="a.b",
        reason="HTTP 404",
        dead_at=now - timedelta(seconds=60),
    )
    counters.increment_many({"attempts_success": 5, "attempts_retryable": 2})
    counters.increment("idempotency_replays")

    response = Client().get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert metric(text, 'homing_attempts_total{outcome="success"}') == 5
    assert metric(text, 'homing_attempts_total{outcome="retryable"}') == 2
    assert metric(text, 'homing_attempts_total{outcome="fatal"}') == 0
    assert metric(text, 'homing_deliveries{status="pending"}') == 2
    assert metric(text, 'homing_deliveries{status="dead"}') == 1
    assert metric(text, "homing_dead_letters") == 1
    assert 60 <= metric(text, "homing_dead_letter_oldest_age_seconds") < 70
    assert 7 <= metric(text, "homing_delivery_lag_seconds") < 15
    assert metric(text, "homing_idempotency_replays_total") == 1
    assert metric(text, "homing_idempotency_conflicts_total") == 0


@pytest.fixture(autouse=True)
def _fresh_gauges():
    gauges._cached = None
    yield
    gauges._cached = None


def test_it_answers_200_without_redis_leaving_out_what_it_cannot_read(alice, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    redis_client.cache_clear()
    try:
        response = Client().get("/metrics")
    finally:
        redis_client.cache_clear()
    assert response.status_code == 200
    text = response.content.decode()
    assert "homing_attempts_total" not in text  # counters live in Redis
    assert 'homing_deliveries{status="pending"}' in text  # the database still answers


def test_it_requires_the_metrics_token_when_set(db, settings):
    settings.HOMING_METRICS_TOKEN = "s3cret-scrape"
    assert Client().get("/metrics").status_code == 401
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrapf")
    assert wrong.status_code == 401
    right = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape")
    assert right.status_code == 200 and "homing_deliveries" in right.content.decode()


def test_a_scrape_soon_after_another_reads_no_table(db):
    assert Client().get("/metrics").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert Client().get("/metrics").status_code == 200
    assert [q["sql"] for q in queries.captured_queries] == []


def test_it_counts_accepted_events(alice, django_capture_on_commit_callbacks):
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    counters.flush()  # the web process counts from a background thread
    text = Client().get("/metrics").content.decode()
    assert metric(text, "homing_events_total") == 2


def _rows_read(plan: dict, tables: set[str]) -> int:
    """The most rows any scan of `tables` read in an EXPLAIN ANALYZE plan."""
    read = 0
    if plan.get("Relation Name") in tables:
        read = int(plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1))
    for child in plan.get("Plans", []):
        read = max(read, _rows_read(child, tables))
    return read


def test_a_scrape_reads_a_bounded_number_of_rows_however_big_the_tables(alice):
    """50,000 pending deliveries and 50,000 dead ones with their dead letters: no statement
    of a scrape reads more than EXACT_UP_TO rows of either table (the gauges were one
    GROUP BY over every delivery, and a count of every dead letter)."""
    endpoint_id = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json"
    ).json()["id"]
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    delivery = Delivery.objects.get(endpoint_id=endpoint_id)
    table, letters = Delivery._meta.db_table, DeadLetter._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {table} (id, tenant_id, event_id, endpoint_id, status,
                attempt_count, schedule_offset, next_attempt_at, last_error, created_at,
                updated_at, sequence)
            SELECT 'dlv_m' || n, tenant_id, event_id, endpoint_id,
                CASE WHEN n %% 2 = 0 THEN 'pending' ELSE 'dead' END, 0, 0,
                CASE WHEN n %% 2 = 0 THEN now() + interval '1 day' END, '', now(), now(), 1 + n
            FROM {table}, generate_series(1, 100000) AS n WHERE id = %s""",
            [delivery.id],
        )
        cursor.execute(
            f"""INSERT INTO {letters} (id, tenant_id, delivery_id, event_id, endpoint_id,
                event_type, reason, dead_at)
            SELECT 'dl_' || id, tenant_id, id, event_id, endpoint_id, 'a.b', 'HTTP 404', now()
            FROM {table} WHERE status = 'dead'"""
        )
        cursor.execute(f"ANALYZE {table}")
        cursor.execute(f"ANALYZE {letters}")

    with CaptureQueriesContext(connection) as queries:
        text = Client().get("/metrics").content.decode()
    statements = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert statements
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            read = _rows_read(plan[0]["Plan"], {table, letters})
            assert read <= selectors.EXACT_UP_TO + 1, f"{read} rows read by {sql}"
    # Still the right figures, within the statistics' precision.
    assert metric(text, 'homing_deliveries{status="pending"}') == pytest.approx(50_001, rel=0.05)
    assert metric(text, 'homing_deliveries{status="dead"}') == pytest.approx(50_000, rel=0.05)
    assert metric(text, "homing_dead_letters") == pytest.approx(50_000, rel=0.05)


def test_attempt_durations_are_a_histogram_by_outcome(alice):
    from deliveries.lifecycle.policy import current_policy
    from deliveries.lifecycle.recording import Attempted, attempts_record
    from deliveries.results import SendResult
    from deliveries.worker.claims import deliveries_claim

    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    answers = [(200, 20), (200, 80), (200, 3000), (503, 12000)]
    for _ in answers:
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    claimed = deliveries_claim(limit=10, policy=current_policy())
    attempts_record(
        outcomes=[
            Attempted(d, SendResult(code, None, b"", None, ms), timezone.now(), current_policy())
            for d, (code, ms) in zip(claimed, answers, strict=True)
        ]
    )

    text = Client().get("/metrics").content.decode()

    assert "# TYPE homing_attempt_duration_seconds histogram" in text
    bucket = 'homing_attempt_duration_seconds_bucket{{outcome="{}",le="{}"}}'
    assert metric(text, bucket.format("success", "0.025")) == 1
    assert metric(text, bucket.format("success", "0.1")) == 2
    assert metric(text, bucket.format("success", "2.5")) == 2
    assert metric(text, bucket.format("success", "5")) == 3
    assert metric(text, bucket.format("success", "+Inf")) == 3
    assert metric(text, 'homing_attempt_duration_seconds_sum{outcome="success"}') == 3.1
    assert metric(text, 'homing_attempt_duration_seconds_count{outcome="success"}') == 3
    assert metric(text, bucket.format("retryable", "10")) == 0
    assert metric(text, bucket.format("retryable", "+Inf")) == 1
    assert metric(text, 'homing_attempt_duration_seconds_count{outcome="fatal"}') == 0
