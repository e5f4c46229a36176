"""Reads of the dead-letter queue: which dead letters a filter names (shared by the API,
the console and replay jobs), and what an operator asks first (`manage.py stats`): how
big the queue is, how late, what is failing. Every figure is an aggregate over an index,
cheap enough to run any time."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.db import connection
from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from deliveries.models import PENDING_IN_TIME_ORDER, Delivery
from deliveries.selectors import AttemptBucket, endpoint_attempt_figures
from dlq.models import DeadLetter
from webhooks.models import Endpoint

FAILING_ENDPOINTS_SHOWN = 5
# /metrics counts exactly up to this many rows (a few ms through an index); past it, or
# for a table that big, it reads the planner's estimates instead of visiting every row.
EXACT_UP_TO = 10_000


@dataclass(frozen=True)
class QueueGauges:
    deliveries_by_status: dict[str, int]
    dead_letters_waiting: int
    oldest_dead_letter_age: float  # seconds; 0 when none waits
    delivery_lag: float  # seconds the most overdue pending attempt is late; 0 when none
    open_circuits: int = 0  # endpoints whose circuit is open or half-open
    oldest_dead_letter_at: datetime | None = None  # when the oldest waiting one died
    # True when some status counts are the planner's estimates (a big table).
    statuses_estimated: bool = False


@dataclass(frozen=True)
class FailingEndpoint:
    endpoint_id: str
    url: str
    retrying: int  # pending deliveries that have failed at least once
    dead_letters: int  # waiting in the queue


@dataclass(frozen=True)
class PlatformStats:
    deliveries: dict[str, int]
    due_now: int
    delivery_lag_seconds: float
    dead_letters: int
    oldest_dead_letter_age_seconds: float
    open_circuits: int
    failing_endpoints: list[FailingEndpoint]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def platform_stats() -> PlatformStats:
    gauges = queue_gauges()
    now = timezone.now()
    # Index delivery_due_by_time answers this.
    due_now = Delivery.objects.filter(PENDING_IN_TIME_ORDER, next_attempt_at__lte=now).count()
    return PlatformStats(
        deliveries=gauges.deliveries_by_status,
        due_now=due_now,
        delivery_lag_seconds=round(gauges.delivery_lag, 3),
        dead_letters=gauges.dead_letters_waiting,
        oldest_dead_letter_age_seconds=round(gauges.oldest_dead_letter_age, 3),
        open_circuits=gauges.open_circuits,
        failing_endpoints=_failing_endpoints(),
    )


def _failing_endpoints() -> list[FailingEndpoint]:
    retrying = dict(
        Delivery.objects.filter(status=Delivery.Status.PENDING)
        .exclude(last_error="")
        .values_list("endpoint_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    dead = dict(
        dead_letters_waiting(criteria={})
        .values_list("endpoint_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    worst = sorted(
        set(retrying) | set(dead), key=lambda pk: (-(retrying.get(pk, 0) + dead.get(pk, 0)), pk)
    )[:FAILING_ENDPOINTS_SHOWN]
    urls = dict(Endpoint.objects.filter(Q(pk__in=worst)).values_list("id", "url"))
    return [
        FailingEndpoint(
            endpoint_id=pk,
            url=urls.get(pk, ""),
            retrying=retrying.get(pk, 0),
            dead_letters=dead.get(pk, 0),
        )
        for pk in worst
    ]


def queue_gauges() -> QueueGauges:
    """Exact figures (`manage.py stats`): counts that visit every row of big tables."""
    now = timezone.now()
    by_status = {status: 0 for status in Delivery.Status.values}
    for row in Delivery.objects.values("status").annotate(n=Count("id")).order_by():
        by_status[row["status"]] = row["n"]
    waiting = dead_letters_waiting(criteria={}).aggregate(n=Count("id"), oldest=Min("dead_at"))
    return QueueGauges(
        deliveries_by_status=by_status,
        dead_letters_waiting=waiting["n"],
        oldest_dead_letter_age=_age(now, waiting["oldest"]),
        delivery_lag=_age(now, _most_overdue(now)),
        open_circuits=open_circuits_count(),
        oldest_dead_letter_at=waiting["oldest"],
    )


def queue_gauges_bounded() -> QueueGauges:
    """The same figures for /metrics and the console's dashboard, at a bounded cost
    whatever the tables' sizes (no scan per scrape, CONTRACT section 5; a page in 300 ms,
    section 7): counts stop at EXACT_UP_TO rows read through a partial index, and beyond
    that (or for statuses no index holds) they are the planner's estimates, refreshed by
    autovacuum's ANALYZE."""
    now = timezone.now()
    waiting = dead_letters_waiting(criteria={})
    # Index deadletter_queue_waiting, in dead_at order: one index read.
    oldest = waiting.order_by("dead_at").values_list("dead_at", flat=True).first()
    by_status, estimated = _deliveries_by_status_bounded()
    return QueueGauges(
        deliveries_by_status=by_status,
        dead_letters_waiting=count_bounded(waiting),
        oldest_dead_letter_age=_age(now, oldest),
        delivery_lag=_age(now, _most_overdue(now)),
        open_circuits=open_circuits_count(),
        oldest_dead_letter_at=oldest,
        statuses_estimated=estimated,
    )


def _deliveries_by_status_bounded() -> tuple[dict[str, int], bool]:
    """Deliveries by status, and whether some of the counts are estimates."""
    by_status = {status: 0 for status in Delivery.Status.values}
    estimates = _status_estimates()
    if estimates is None:  # a small table (or not PostgreSQL): counted exactly, cheaply
        for row in Delivery.objects.values("status").annotate(n=Count("id")).order_by():
            by_status[row["status"]] = row["n"]
        return by_status, False
    by_status.update({k: v for k, v in estimates.items() if k in by_status})
    # The two statuses operators watch are read from their partial indexes
    # (delivery_due_by_time, delivery_lease), exactly up to EXACT_UP_TO.
    pending, delivering = Delivery.Status.PENDING, Delivery.Status.DELIVERING
    by_status[pending] = count_bounded(
        Delivery.objects.filter(PENDING_IN_TIME_ORDER), estimate=by_status[pending]
    )
    by_status[delivering] = count_bounded(
        Delivery.objects.filter(status=delivering, lease_expires_at__isnull=False),
        estimate=by_status[delivering],
    )
    return by_status, True


def count_bounded(rows: QuerySet[Any], *, estimate: int | None = None) -> int:
    """How many `rows`, reading at most EXACT_UP_TO + 1 of them; past that, `estimate`
    (or the planner's estimate of the query)."""
    found = rows.order_by()[: EXACT_UP_TO + 1].count()
    if found <= EXACT_UP_TO:
        return found
    return max(found, estimate if estimate is not None else _planner_rows(rows))


def _planner_rows(rows: QuerySet[Any]) -> int:
    if connection.vendor != "postgresql":
        return rows.count()
    sql, params = rows.order_by().values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return int(plan[0]["Plan"]["Plan Rows"])


def _status_estimates() -> dict[str, int] | None:
    """Deliveries by status from pg_class.reltuples times pg_stats frequencies, or None
    when the table is small enough (or unanalysed) to count exactly."""
    if connection.vendor != "postgresql":
        return None
    table = Delivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
        row = cursor.fetchone()
        if not row or row[0] < EXACT_UP_TO:
            return None
        cursor.execute(
            "SELECT most_common_vals::text::text[], most_common_freqs FROM pg_stats "
            "WHERE tablename = %s AND attname = 'status'",
            [table],
        )
        stats = cursor.fetchone()
    if not stats or not stats[0]:
        return None
    return {value: round(freq * row[0]) for value, freq in zip(stats[0], stats[1], strict=False)}


def _most_overdue(now: datetime) -> datetime | None:
    # The index delivery_due_by_time answers this with one index read.
    return (
        Delivery.objects.filter(PENDING_IN_TIME_ORDER, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("next_attempt_at", flat=True)
        .first()
    )


def open_circuits_count() -> int:
    """Endpoints whose circuit is open or half open (probing)."""
    # The partial index endpoint_circuit holds exactly these rows.
    return Endpoint.objects.exclude(circuit_state=Endpoint.Circuit.CLOSED).count()


def _age(now: datetime, since: datetime | None) -> float:
    return (now - since).total_seconds() if since else 0.0


class Criteria(TypedDict, total=False):
    """A filter over the queue, JSON-serialisable (a replay job stores it)."""

    tenant: str
    owner: str  # the endpoints' owner (a consumer's scope)
    ids: list[str]
    endpoint: str
    event_type: str
    reason: str  # substring, case-insensitive
    dead_after: str  # ISO 8601
    dead_before: str  # ISO 8601
    replayed: bool


def dead_letters_in_queue() -> QuerySet[DeadLetter]:
    """Every dead letter not discarded (replayed ones stay listed, marked replayed)."""
    return DeadLetter.objects.filter(discarded_at__isnull=True)


def dead_letters_matching(*, criteria: Criteria | dict[str, Any]) -> QuerySet[DeadLetter]:
    letters = dead_letters_in_queue()
    filters = Q()
    if "tenant" in criteria:
        filters &= Q(tenant_id=criteria["tenant"])
    if "owner" in criteria:
        filters &= Q(endpoint__owner=criteria["owner"])
    if "ids" in criteria:
        filters &= Q(pk__in=criteria["ids"])
    if "endpoint" in criteria:
        filters &= Q(endpoint_id=criteria["endpoint"])
    if "event_type" in criteria:
        filters &= Q(event_type=criteria["event_type"])
    if "reason" in criteria:
        filters &= Q(reason__icontains=criteria["reason"])
    if "dead_after" in criteria:
        filters &= Q(dead_at__gte=datetime.fromisoformat(criteria["dead_after"]))
    if "dead_before" in criteria:
        filters &= Q(dead_at__lt=datetime.fromisoformat(criteria["dead_before"]))
    if "replayed" in criteria:
        filters &= Q(replayed_at__isnull=not criteria["replayed"])
    return letters.filter(filters)


def dead_letters_waiting(*, criteria: Criteria | dict[str, Any]) -> QuerySet[DeadLetter]:
    """The ones a replay would take: matching, not replayed yet."""
    return dead_letters_matching(criteria=criteria).filter(replayed_at__isnull=True)


# GET /endpoints/{id}/stats?period=: each period in buckets of a step, the last bucket
# holding the current minute (so a period reaches back up to one step further).
STATS_PERIODS = {
    "1h": (timedelta(minutes=1), 60),
    "24h": (timedelta(minutes=15), 96),
    "7d": (timedelta(hours=1), 168),
}


@dataclass(frozen=True)
class EndpointStats:
    period: str
    attempts: dict[str, int]  # outcome -> attempts
    success_rate: float | None  # success / attempts; None without attempts
    duration_ms: dict[str, int | None]  # p50, p95
    # Every public status (CONTRACT section 2): succeeded and dead, the deliveries that
    # finished in the period; pending and delivering, the endpoint's unfinished ones now.
    deliveries: dict[str, int]
    dead_letters: int  # of those that died, the ones still waiting in the queue
    buckets: list[AttemptBucket]


def endpoint_stats(
    *, endpoint: Endpoint, period: str, now: datetime | None = None
) -> EndpointStats:
    """The endpoint's statistics over `period` (a key of STATS_PERIODS), the same for the
    API, the console and the portal.

    Attempts, their outcomes and durations come from the per-minute figures
    (EndpointMinute), never from the attempts. `deliveries.succeeded` is the successful
    attempts (each finishes its delivery); `deliveries.dead` the dead letters written in
    the period (every death writes one; discarded ones left out) and `dead_letters` those
    of them still waiting: index-only counts (deadletter_endpoint_dead,
    deadletter_waiting_endpoint). `deliveries.pending` and `.delivering` are the
    endpoint's unfinished deliveries now (endpoint_unfinished_counts)."""
    step, count = STATS_PERIODS[period]
    now = now or timezone.now()
    epoch = int(now.timestamp())
    step_seconds = int(step.total_seconds())
    last = datetime.fromtimestamp(epoch - epoch % step_seconds, tz=now.tzinfo)
    start = last - step * (count - 1)
    figures = endpoint_attempt_figures(endpoint_id=endpoint.id, start=start, step=step, count=count)
    total = sum(figures.attempts.values())
    died = DeadLetter.objects.filter(endpoint_id=endpoint.id, dead_at__gte=start)
    return EndpointStats(
        period=period,
        attempts=figures.attempts,
        success_rate=figures.attempts["success"] / total if total else None,
        duration_ms={
            "p50": figures.duration_quantile(0.5),
            "p95": figures.duration_quantile(0.95),
        },
        deliveries={
            **endpoint_unfinished_counts(endpoint_id=endpoint.id),
            Delivery.Status.SUCCEEDED: figures.attempts["success"],
            Delivery.Status.DEAD: died.filter(discarded_at__isnull=True).count(),
        },
        dead_letters=died.filter(replayed_at__isnull=True, discarded_at__isnull=True).count(),
        buckets=figures.buckets,
    )


def endpoint_unfinished_counts(*, endpoint_id: str) -> dict[str, int]:
    """The endpoint's pending and delivering deliveries now, by their public status (a
    held one, waiting in its ordering key's line, is pending to the API).

    Each status is counted through a partial index, exactly up to EXACT_UP_TO rows (a few
    milliseconds), and past that it is the planner's estimate (count_bounded): a COUNT
    of a million-deep backlog walks a million index entries, 150-300 ms (bench/README.md,
    backpressure), and no per-endpoint count is kept. Indexes: delivery_endpoint_due
    (pending), delivery_endpoint_held (held), delivery_lease (delivering: every
    in-flight delivery, a few thousand at most, whatever the backlogs)."""
    mine = Delivery.objects.filter(endpoint_id=endpoint_id)
    pending = count_bounded(mine.filter(status=Delivery.Status.PENDING))
    held = count_bounded(mine.filter(status=Delivery.Status.HELD))
    delivering = count_bounded(
        mine.filter(status=Delivery.Status.DELIVERING, lease_expires_at__isnull=False)
    )
    return {Delivery.Status.PENDING: pending + held, Delivery.Status.DELIVERING: delivering}
