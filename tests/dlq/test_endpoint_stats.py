"""GET /api/v1/endpoints/{id}/stats: attempts by outcome, success rate, p50/p95
duration, deliveries finished, dead letters and buckets, from the per-minute figures."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.lifecycle.retry import Outcome, classify
from deliveries.models import Attempt, Delivery, EndpointMinute
from deliveries.results import SendResult
from deliveries.selectors import AttemptFigures
from deliveries.worker.claims import deliveries_claim
from dlq.models import DeadLetter
from dlq.selectors import endpoint_stats
from tests.databases import statements_run
from tests.factories import endpoint_row

pytestmark = pytest.mark.django_db

# What alice's shop answers, in turn, with how long it took (ms).
ANSWERS = [(200, 4), (200, 30), (503, 120), (200, 700), (404, 60), (503, 3000), (200, 8)]


def _attempt_all(actor, answers: list[tuple[int, int]]) -> None:
    for i in range(len(answers)):
        posted = actor.client.post(
            "/api/v1/events", {"type": "a.b", "data": {"i": i}}, format="json"
        )
        assert posted.status_code == 202
    claimed = sorted(deliveries_claim(limit=100, policy=current_policy()), key=lambda d: d.id)
    outcomes = [
        Attempted(d, SendResult(status, None, b"", None, ms), timezone.now(), current_policy())
        for d, (status, ms) in zip(claimed, answers, strict=True)
    ]
    attempts_record(outcomes=outcomes)


def test_the_stats_equal_a_count_of_the_attempts_made(alice) -> None:
    shop = endpoint_row(alice.tenant)
    _attempt_all(alice, ANSWERS)

    answer = alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period=1h")

    assert answer.status_code == 200
    body = answer.json()
    made = Counter(
        classify(status_code=a.status_code, error_kind=None).outcome.value
        for a in Attempt.objects.filter(delivery__endpoint=shop)
    )
    assert body["period"] == "1h"
    assert body["attempts"] == {o.value: made[o.value] for o in Outcome}
    assert body["attempts"] == {"success": 4, "retryable": 2, "fatal": 1}
    assert body["success_rate"] == pytest.approx(4 / 7)
    succeeded = Delivery.objects.filter(endpoint=shop, status=Delivery.Status.SUCCEEDED).count()
    dead = DeadLetter.objects.filter(endpoint=shop).count()
    assert (
        body["deliveries"] == {"succeeded": succeeded, "dead": dead} == {"succeeded": 4, "dead": 1}
    )
    assert body["dead_letters"] == 1
    # 7 durations: 4, 8, 30, 60, 120, 700, 3000 ms; the median is in (50, 100].
    assert 50 < body["duration_ms"]["p50"] <= 100
    assert 2500 < body["duration_ms"]["p95"] <= 5000
    assert len(body["buckets"]) == 60
    assert sum(b["success"] for b in body["buckets"]) == 4
    assert body["buckets"][-1] == {**body["attempts"], "start": body["buckets"][-1]["start"]}
    starts = [datetime.fromisoformat(b["start"].replace("Z", "+00:00")) for b in body["buckets"]]
    assert {b - a for a, b in itertools.pairwise(starts)} == {timedelta(minutes=1)}


def test_a_replayed_dead_letter_leaves_the_waiting_count(alice) -> None:
    shop = endpoint_row(alice.tenant)
    _attempt_all(alice, [(404, 10), (400, 10)])
    letter = DeadLetter.objects.filter(endpoint=shop).earliest("dead_at")
    assert alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay").status_code == 202

    body = alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period=24h").json()

    assert body["deliveries"]["dead"] == 2
    assert body["dead_letters"] == 1
    assert len(body["buckets"]) == 96


def test_bob_cannot_read_alices_endpoint_stats(alice, bob) -> None:
    shop = endpoint_row(alice.tenant)
    assert bob.client.get(f"/api/v1/endpoints/{shop.id}/stats").status_code == 404
    assert alice.client.get(f"/api/v1/endpoints/{shop.id}/stats").json()["period"] == "24h"
    # Given empty, as a browser form sends it: the default, as for every query parameter.
    assert alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period=").json()["period"] == "24h"


def test_an_unknown_period_is_refused_naming_it(alice) -> None:
    shop = endpoint_row(alice.tenant)
    answer = alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period=2d")
    assert answer.status_code == 400
    assert "period" in answer.json()["errors"] or "period" in str(answer.json())


def test_an_endpoint_without_attempts_has_zeros_and_no_rate(alice) -> None:
    shop = endpoint_row(alice.tenant)
    body = alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period=7d").json()
    assert body["attempts"] == {"success": 0, "retryable": 0, "fatal": 0}
    assert body["success_rate"] is None
    assert body["duration_ms"] == {"p50": None, "p95": None}
    assert len(body["buckets"]) == 168


def test_the_stats_read_the_minutes_never_the_attempts(alice) -> None:
    shop = endpoint_row(alice.tenant)
    now = datetime(2026, 11, 23, 10, 30, tzinfo=UTC)
    # A week of minutes, each with 100 attempts: 1,008,000 attempts in the period.
    EndpointMinute.objects.bulk_create(
        EndpointMinute(
            endpoint_id=shop.id, minute=now - timedelta(minutes=m), success=99, fatal=1, d_100=100
        )
        for m in range(7 * 24 * 60)
    )
    with statements_run() as ran:
        stats = endpoint_stats(endpoint=shop, period="7d", now=now + timedelta(seconds=20))
    assert not any("deliveries_attempt " in sql or "deliveries_attempt\n" in sql for sql in ran)
    assert sum(stats.attempts.values()) == 100 * 60 * (24 * 7 - 1) + 100 * 31
    assert stats.buckets[-1].start == datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    assert stats.buckets[-1].success == 99 * 31
    assert stats.duration_ms == {"p50": 75, "p95": 98}


def test_the_quantiles_interpolate_within_a_bucket() -> None:
    # 10 attempts in (25, 50], 10 in (100, 250], 0 elsewhere.
    figures = AttemptFigures(attempts={}, durations=[0, 10, 0, 10, 0, 0, 0, 0, 0, 0], buckets=[])
    assert figures.duration_quantile(0.5) == 50
    assert figures.duration_quantile(0.75) == 175
    assert figures.duration_quantile(0.25) == 38
    slow = AttemptFigures(attempts={}, durations=[0] * 9 + [3], buckets=[])
    assert slow.duration_quantile(0.5) == 10000
