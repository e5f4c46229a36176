"""Claiming due deliveries: conditional UPDATE … RETURNING, safe under concurrency.

A claim moves `pending` rows whose time has come to `delivering` with a lease and
numbers their attempt. Two claimers never get the same row: on PostgreSQL each locks
the rows it picks (FOR UPDATE SKIP LOCKED re-checks a row a concurrent claimer just
changed, and skips one it holds); on SQLite, which serialises writers anyway, the
UPDATE repeats the `status` check.

A claim goes endpoint by endpoint, not down one queue of due rows: it asks which
endpoints have work due (a skip scan, one index probe per endpoint), deals its rows out
fairly between tenants (fair_share.py) within each endpoint's room, and takes each
endpoint's share through the `delivery_endpoint_due` index. So a tenant's 40,000-row
backlog does not stand in front of another tenant's new event, and an endpoint that is
full, throttled or circuit-open costs nothing: it is simply not asked.

A claim returns plain records with the event and endpoint loaded (two more queries per
batch, not per delivery): the worker handles hundreds of them a second, and building
three model instances for each cost more than sending it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F
from django.db.models.functions import Now
from django.utils import timezone

from deliveries.fair_share import DueEndpoint, fair_shares
from deliveries.models import PENDING_IN_TIME_ORDER, Delivery
from deliveries.policy import Policy
from deliveries.services.health import circuits_not_closed
from webhooks.models import Endpoint, Event

# Deliveries one claim takes at most. Each claim, load and recorder transaction has a
# fixed cost, so larger batches are cheaper per delivery: measured with `make bench`
# (2 workers, one endpoint), 50 drained ~1,290/s and 100 ~1,350-1,430/s; 150 no better.
BATCH_SIZE = 100
# Endpoints one look for due work lists at most (see due_endpoints).
DUE_ENDPOINTS_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    id: str
    type: str
    data: Any
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery this worker holds the lease of, with what its attempt needs."""

    id: str
    tenant_id: str
    attempt_count: int  # the number of the attempt this claim makes
    schedule_offset: int
    sequence: int  # the `homing-sequence` header
    event: ClaimedEvent
    endpoint: Endpoint
    ordering_key: str | None = None  # in its key's line (services/ordering.py)
    head_since: datetime | None = None  # first of that line since

    @property
    def event_id(self) -> str:
        return self.event.id

    @property
    def endpoint_id(self) -> str:
        return self.endpoint.id

    @property
    def attempts_in_schedule(self) -> int:
        return self.attempt_count - self.schedule_offset


@dataclass(frozen=True, slots=True)
class Claim:
    """What one claim took, and which endpoints had fewer due rows than it asked for
    (nothing more is due there for now: the worker leaves them out until it looks again)."""

    deliveries: list[Claimed]
    exhausted: set[str]


def deliveries_claim(**how: Any) -> list[Claimed]:
    """The deliveries of `deliveries_claim_fairly(**how)` (which see)."""
    return deliveries_claim_fairly(**how).deliveries


def deliveries_claim_fairly(
    *,
    limit: int,
    policy: Policy,
    due: Sequence[DueEndpoint] | None = None,
    room: Callable[[DueEndpoint], int] | None = None,
    rotation: int = 0,
    skip_endpoints: Collection[str] = (),
    first_attempts_only: bool = False,
    retries_only: bool = False,
) -> Claim:
    """Claim up to `limit` due deliveries: one probe per open circuit whose time has
    come, then rows of the `due` endpoints
    (queried here when not given) shared fairly between tenants (fair_share.py), at most
    `room(endpoint)` each. Never for `skip_endpoints` (full or throttled) nor for
    endpoints whose circuit is not closed. `first_attempts_only` or `retries_only`: the
    worker's retry budget (worker/budget.py) decides."""
    paused, probes = circuits_not_closed()
    rows: list[tuple[Any, ...]] = []
    for endpoint_id in probes[:limit]:
        # The probe is a real waiting delivery; none due means the next probe is later.
        rows += _claim_rows("endpoint_id = %s", [endpoint_id], policy.lease_seconds, 1)
    limit -= len(rows)
    if limit <= 0:
        return Claim(_with_events_and_endpoints(rows), set())
    skip = {*skip_endpoints, *paused}
    which_attempts = " AND attempt_count = schedule_offset" if first_attempts_only else ""
    if retries_only:
        which_attempts = " AND attempt_count > schedule_offset"
    # `limit` is what the probes left. (Their endpoints are paused, so skipped below.)
    candidates = [e for e in (due_endpoints() if due is None else due) if e.id not in skip]
    shares = fair_shares(
        limit=limit,
        endpoints=candidates,
        room=lambda e: limit if room is None else room(e),
        rotation=rotation,
    )
    by_endpoint = _claim_by_endpoint(shares, which_attempts, policy.lease_seconds)
    got = Counter(row[3] for row in by_endpoint)
    exhausted = {endpoint for endpoint, share in shares.items() if got[endpoint] < share}
    return Claim(_with_events_and_endpoints(rows + by_endpoint), exhausted)


def due_endpoints(*, after: str = "", limit: int = DUE_ENDPOINTS_LIMIT) -> list[DueEndpoint]:
    """Active endpoints with a closed circuit and at least one delivery due now, in id order
    from `after` on: a caller that gets `limit` of them asks next from the last one, so
    beyond `limit` endpoints every one still has its turn.

    On PostgreSQL a skip scan of the `delivery_endpoint_due` index: one probe per
    endpoint with pending deliveries finds its earliest one, whatever the depth of its
    backlog, so a 100,000-deep backlog costs one probe, not a scan (DESIGN decision 12)."""
    table, endpoints = Delivery._meta.db_table, Endpoint._meta.db_table
    if connection.vendor == "postgresql":
        sql = f"""
            WITH RECURSIVE pending(endpoint_id, next_at) AS (
                (SELECT endpoint_id, next_attempt_at FROM {table}
                 WHERE status = 'pending' AND endpoint_id > %s
                 ORDER BY endpoint_id, next_attempt_at LIMIT 1)
                UNION ALL
                SELECT later.* FROM pending CROSS JOIN LATERAL (
                    SELECT endpoint_id, next_attempt_at FROM {table}
                    WHERE status = 'pending' AND endpoint_id > pending.endpoint_id
                    ORDER BY endpoint_id, next_attempt_at LIMIT 1
                ) later
            )
            SELECT e.id, e.tenant_id, e.rate_limit
            FROM pending JOIN {endpoints} e ON e.id = pending.endpoint_id
            WHERE pending.next_at <= statement_timestamp() AND e.circuit_state = 'closed'
            AND e.is_active
            LIMIT %s
        """
        params: list[Any] = [after, limit]
    else:
        sql = f"""
            SELECT DISTINCT e.id, e.tenant_id, e.rate_limit
            FROM {table} d JOIN {endpoints} e ON e.id = d.endpoint_id
            WHERE d.status = 'pending' AND d.next_attempt_at <= %s
            AND e.circuit_state = 'closed' AND e.is_active AND e.id > %s
            ORDER BY e.id LIMIT %s
        """
        params = [timezone.now(), after, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [DueEndpoint(*row) for row in cursor.fetchall()]


def deliveries_due_exist() -> bool:
    """Whether any delivery is due: a read, so an idle worker's poll takes no write lock."""
    return Delivery.objects.filter(PENDING_IN_TIME_ORDER, next_attempt_at__lte=Now()).exists()


def deliveries_give_back(
    *, delivery_ids: Sequence[str], delay: timedelta = timedelta(0), last_error: str | None = None
) -> None:
    """Undo a claim without an attempt: the deliveries are due again after `delay`
    (at once by default); `last_error` says why they wait, when it is worth saying."""
    changes: dict[str, Any] = {} if last_error is None else {"last_error": last_error[:500]}
    Delivery.objects.filter(pk__in=delivery_ids, status=Delivery.Status.DELIVERING).update(
        status=Delivery.Status.PENDING,
        lease_expires_at=None,
        attempt_count=F("attempt_count") - 1,
        next_attempt_at=ExpressionWrapper(Now() + delay, output_field=DateTimeField()),
        updated_at=timezone.now(),
        **changes,
    )


def _claim_rows(
    condition: str, params: list[Any], lease_seconds: float, limit: int
) -> list[tuple[Any, ...]]:
    """Claim up to `limit` due rows matching `condition`."""
    # No ORDER BY: with it, PostgreSQL sorts every due row matching (thousands in a
    # backlog) whenever its statistics are stale; without, the scan stops at `limit`.
    # The endpoint is checked in the claim itself, not only in the due list (which a
    # worker keeps for REFRESH_SECONDS): once a deactivation or deletion has committed,
    # no claim takes its deliveries.
    picked = f"""
        SELECT id FROM {Delivery._meta.db_table}
        WHERE {condition} AND status = 'pending' AND next_attempt_at <= {{now}}
        AND endpoint_id IN (SELECT id FROM {Endpoint._meta.db_table} WHERE is_active)
        LIMIT %s{{skip_locked}}
    """
    return _claim(picked, lambda now: [*params, *now, limit], lease_seconds)


def _claim_by_endpoint(
    shares: dict[str, int], which_attempts: str, lease_seconds: float
) -> list[tuple[Any, ...]]:
    """Claim `shares[endpoint]` due rows (at most) of each endpoint, oldest first."""
    if not shares:
        return []
    if connection.vendor != "postgresql":  # the embedded set-up: one statement each
        rows = []
        for endpoint_id, share in shares.items():
            rows += _claim_rows(
                f"endpoint_id = %s{which_attempts}", [endpoint_id], lease_seconds, share
            )
        return rows
    # One statement for all: per endpoint a LATERAL walk of `delivery_endpoint_due`,
    # which stops after its share, however deep the backlog behind it. Only active
    # endpoints (see _claim_rows).
    picked = f"""
        SELECT d.id FROM unnest(%s::text[], %s::int[]) AS share(endpoint_id, n)
        JOIN {Endpoint._meta.db_table} e ON e.id = share.endpoint_id AND e.is_active
        CROSS JOIN LATERAL (
            SELECT id FROM {Delivery._meta.db_table}
            WHERE endpoint_id = share.endpoint_id AND status = 'pending'
            AND next_attempt_at <= {{now}}{which_attempts}
            ORDER BY next_attempt_at LIMIT share.n{{skip_locked}}
        ) d
    """
    return _claim(picked, lambda now: [list(shares), list(shares.values())], lease_seconds)


def _claim(
    picked: str, picked_params: Callable[[list[Any]], list[Any]], lease_seconds: float
) -> list[tuple[Any, ...]]:
    """Move the rows `picked` selects to `delivering` with a lease; their records."""
    table = Delivery._meta.db_table
    # The database's clock decides what is due and when a lease ends: every worker and
    # scheduler then agree, however far their own clocks drift. (SQLite, the embedded
    # single-machine set-up, is given this process's clock.)
    if connection.vendor == "postgresql":
        now, lease_until = (
            "statement_timestamp()",
            "statement_timestamp() + make_interval(secs => %s)",
        )
        stamps: list[Any] = []
        lease: list[Any] = [lease_seconds]
    else:
        current = timezone.now()
        now, lease_until = "%s", "%s"
        stamps, lease = [current], [current + timedelta(seconds=lease_seconds)]
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    # The due rows are picked once, in a MATERIALIZED CTE on PostgreSQL: as a plain
    # `IN (subquery … LIMIT)` the planner may rescan the subquery (a nested loop on
    # stale statistics), and with SKIP LOCKED each rescan finds other rows, so one
    # claim took thousands instead of `limit` (measured: 1,853 rows for a limit of 100).
    materialized = " MATERIALIZED" if connection.vendor == "postgresql" else ""
    # Locked rows (FOR UPDATE re-checks one another claim changed meanwhile) are updated
    # by primary key alone: with the conditions repeated, the planner could also find
    # them by scanning every due row (on statistics taken when little was pending).
    # Without row locks (SQLite), the repeated conditions are the guard.
    recheck = "" if skip_locked else f" AND status = 'pending' AND next_attempt_at <= {now}"
    sql = f"""
        WITH picked AS{materialized} ({picked.format(now=now, skip_locked=skip_locked)})
        UPDATE {table} SET status = 'delivering', lease_expires_at = {lease_until},
            attempt_count = attempt_count + 1, updated_at = {now}
        WHERE id IN (SELECT id FROM picked){recheck}
        RETURNING id, tenant_id, event_id, endpoint_id, attempt_count, schedule_offset, sequence,
            ordering_key, head_since
    """
    params = [*picked_params(stamps), *lease, *stamps, *(stamps if recheck else [])]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _with_events_and_endpoints(rows: list[tuple[Any, ...]]) -> list[Claimed]:
    if not rows:
        return []
    events = {
        event_id: ClaimedEvent(event_id, event_type, data, created_at)
        for event_id, event_type, data, created_at in Event.objects.filter(
            pk__in={row[2] for row in rows}
        ).values_list("id", "type", "data", "created_at")
    }
    # all_objects: an endpoint deleted since the claim is still read, found inactive,
    # and its deliveries recorded unsent.
    endpoints = Endpoint.all_objects.in_bulk({row[3] for row in rows})
    claimed = []
    for row in rows:
        delivery_id, tenant_id, event_id, endpoint_id, attempt_count, offset, sequence = row[:7]
        # An endpoint deleted since the claim took its deliveries with it (cascade).
        if endpoint_id not in endpoints or event_id not in events:
            continue
        claimed.append(
            Claimed(
                id=delivery_id,
                tenant_id=tenant_id,
                attempt_count=attempt_count,
                schedule_offset=offset,
                sequence=sequence,
                event=events[event_id],
                endpoint=endpoints[endpoint_id],
                ordering_key=row[7],
                head_since=row[8],
            )
        )
    return claimed
