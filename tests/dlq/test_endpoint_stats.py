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
    # The two 503s wait for their retries.
    assert body["deliveries"] == {"pending": 2, "delivering": 0, "succeeded": 4, "dead": 1}
    assert (body["deliveries"]["succeeded"], body["deliveries"]["dead"]) == (succeeded, dead)
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
    assert body["deliveries"] == {"pending": 0, "delivering": 0, "succeeded": 0, "dead": 0}
    assert len(body["buckets"]) == 168


def _post(actor, n: int, ordering_key: str | None = None) -> None:
    for i in range(n):
        event = {"type": "a.b", "data": {"i": i}, "ordering_key": ordering_key}
        assert actor.client.post("/api/v1/events", event, format="json").status_code == 202


def test_the_unfinished_deliveries_equal_a_count_of_the_rows_now(alice) -> None:
    shop = endpoint_row(alice.tenant, event_types=["a.b"])
    # 4 events claimed: 2 succeed, 1 dies, 1 stays in flight (claimed, not recorded).
    _post(alice, 4)
    claimed = sorted(deliveries_claim(limit=100, policy=current_policy()), key=lambda d: d.id)
    answers = [SendResult(200, None, b"", None, 5)] * 2 + [SendResult(404, None, b"", None, 5)]
    attempts_record(
        outcomes=[
            Attempted(d, result, timezone.now(), current_policy())
            for d, result in zip(claimed, answers, strict=False)
        ]
    )
    # 2 waiting, and an ordering key's line of 3: its head pending, 2 held behind it.
    _post(alice, 2)
    _post(alice, 3, ordering_key="order-123")
    # Alice's other endpoint's deliveries are not the shop's.
    endpoint_row(alice.tenant, event_types=["other"])
    alice.client.post("/api/v1/events", {"type": "other", "data": {}}, format="json")

    body = alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period=1h").json()

    rows = Counter(Delivery.objects.filter(endpoint=shop).values_list("status", flat=True))
    assert rows == {"succeeded": 2, "dead": 1, "delivering": 1, "pending": 3, "held": 2}
    assert body["deliveries"] == {
        "pending": rows["pending"] + rows["held"],  # held is pending to the API
        "delivering": rows["delivering"],
        "succeeded": rows["succeeded"],
        "dead": rows["dead"],
    }
    assert list(body["deliveries"]) == ["pending", "delivering", "succeeded", "dead"]


def test_a_deep_backlog_is_counted_up_to_a_bound(alice, monkeypatch) -> None:
    shop = endpoint_row(alice.tenant)
    _post(alice, 5)
    _post(alice, 3, ordering_key="k")
    monkeypatch.setattr("dlq.selectors.EXACT_UP_TO", 2)

    with statements_run() as ran:
        body = alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period=1h").json()

    # 6 pending (past the bound: the planner's estimate, never below the bound + 1) and 2
    # held (within it: exact).
    assert body["deliveries"]["pending"] >= 3 + 2
    counts = [sql for sql in ran if "deliveries_delivery" in sql and "COUNT(" in sql.upper()]
    assert len(counts) == 3 and all("LIMIT 3" in sql for sql in counts)


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


# CONTRACT section 2, word for word: `{period, attempts: {success, retryable, fatal},
# success_rate, duration_ms: {p50, p95}, deliveries: {<status>: n}, dead_letters,
# buckets: [{start, success, retryable, fatal}]}`; <status> is a public status.
STATS_KEYS = {
    "period",
    "attempts",
    "success_rate",
    "duration_ms",
    "deliveries",
    "dead_letters",
    "buckets",
}
OUTCOMES = {"success", "retryable", "fatal"}
PUBLIC_STATUSES = {"pending", "delivering", "succeeded", "dead"}
PERIODS = {"1h": (timedelta(minutes=1), 60), "24h": (timedelta(minutes=15), 96)}
PERIODS["7d"] = (timedelta(hours=1), 168)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


@pytest.mark.parametrize("with_attempts", [False, True])
@pytest.mark.parametrize("period", ["1h", "24h", "7d"])
def test_the_answer_has_the_contracts_keys_and_types(alice, period, with_attempts) -> None:
    shop = endpoint_row(alice.tenant)
    if with_attempts:
        _attempt_all(alice, ANSWERS)
    before = timezone.now()

    answer = alice.client.get(f"/api/v1/endpoints/{shop.id}/stats?period={period}")
    after = timezone.now()

    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == STATS_KEYS
    assert body["period"] == period
    assert set(body["attempts"]) == OUTCOMES
    assert all(_is_count(n) for n in body["attempts"].values())
    if with_attempts:
        assert type(body["success_rate"]) is float and 0 <= body["success_rate"] <= 1
        assert all(type(body["duration_ms"][q]) is int for q in ("p50", "p95"))
    else:
        assert body["success_rate"] is None
        assert body["duration_ms"] == {"p50": None, "p95": None}
    assert set(body["duration_ms"]) == {"p50", "p95"}
    assert set(body["deliveries"]) == PUBLIC_STATUSES
    assert all(_is_count(n) for n in body["deliveries"].values())
    assert _is_count(body["dead_letters"])

    step, count = PERIODS[period]
    buckets = body["buckets"]
    assert len(buckets) == count
    assert all(set(b) == {"start", *OUTCOMES} for b in buckets)
    assert all(_is_count(b[o]) for b in buckets for o in OUTCOMES)
    assert all(b["start"].endswith("Z") for b in buckets)  # ISO 8601 UTC
    starts = [datetime.fromisoformat(b["start"].replace("Z", "+00:00")) for b in buckets]
    assert all(s.utcoffset() == timedelta(0) for s in starts)
    assert {b - a for a, b in itertools.pairwise(starts)} == {step}
    # The buckets start on their step, the last one holds now.
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert all((s - epoch) % step == timedelta(0) for s in starts)
    # (Taken around the request: a bucket boundary may pass while it is answered, and
    # the database's clock may differ from this process's by a few seconds.)
    slack = timedelta(seconds=5)
    assert starts[-1] <= after + slack and before < starts[-1] + step + slack
    assert {o: sum(b[o] for b in buckets) for o in OUTCOMES} == body["attempts"]


def test_the_schema_states_the_contracts_keys(alice) -> None:
    schema = alice.client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    [operation] = [
        methods["get"] for path, methods in schema["paths"].items() if path.endswith("/stats")
    ]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    components = schema["components"]["schemas"]

    def properties(reference: str) -> dict:
        return components[reference.rsplit("/", 1)[1]]["properties"]

    stats = properties(ref)
    assert set(stats) == STATS_KEYS
    assert set(properties(stats["attempts"]["$ref"])) == OUTCOMES
    assert set(properties(stats["deliveries"]["$ref"])) == PUBLIC_STATUSES
    assert set(properties(stats["duration_ms"]["$ref"])) == {"p50", "p95"}
    assert set(properties(stats["buckets"]["items"]["$ref"])) == {"start", *OUTCOMES}
    period = stats["period"]
    if "$ref" in period:
        period = components[period["$ref"].rsplit("/", 1)[1]]
    assert period["enum"] == ["1h", "24h", "7d"]
