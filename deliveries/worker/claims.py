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

A claim returns plain records with the event (from the claim statement itself) and the
endpoint loaded (one more query per batch, not per delivery), its send settings resolved
once per endpoint (send_settings.py): the worker handles thousands of them a second, and
building model instances for each cost more than sending it.

The statements themselves are in claim_sql.py (PostgreSQL), written once and whole, and
claims_sqlite.py (the embedded set-up); this module chooses their parameters.
"""

from __future__ import annotations

import functools
import json
import operator
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q
from django.db.models.functions import Now
from django.utils import timezone

from deliveries.lifecycle.health import open_circuits_claim_probes
from deliveries.lifecycle.in_hand import EventInHand, InHand
from deliveries.lifecycle.partitions import EVERY_PARTITION, ClaimBounds
from deliveries.lifecycle.policy import Policy
from deliveries.models import PENDING_IN_TIME_ORDER, Delivery
from deliveries.worker import claim_sql, claims_sqlite
from deliveries.worker.fair_share import DueEndpoint, fair_shares
from deliveries.worker.send_settings import SendSettings, send_settings
from webhooks.models import Endpoint

# Endpoints one look for due work lists at most (see due_endpoints).
DUE_ENDPOINTS_LIMIT = 10_000
ANY_ATTEMPT = {"any_attempt": True, "first_attempts": False}  # the statement's filter


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed(InHand):
    """A delivery this worker holds the lease of, with its endpoint loaded for the attempt
    (its `endpoint_id` is the endpoint's id) and the endpoint's send settings as its claim
    found them (None: this process cannot decrypt them; the worker gives it back)."""

    endpoint: Endpoint
    send: SendSettings | None


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
    tenant_room: Callable[[str], int] | None = None,
    skip_endpoints: Collection[str] = (),
    first_attempts_only: bool = False,
    retries_only: bool = False,
    bounds: ClaimBounds = EVERY_PARTITION,
) -> Claim:
    """Claim up to `limit` due deliveries in one go: the probes whose time has come, then
    rows of the `due` endpoints (queried here when not given) shared fairly between
    tenants (fair_share.py), at most `room(endpoint)` each and `tenant_room(tenant)` per
    tenant, never for `skip_endpoints`; `bounds` as deliveries_claim_shares takes them.
    The worker composes the same two steps with its planner (claim_loop.py); this is the
    whole claim for everyone else."""
    probes = deliveries_claim_probes(limit=limit, policy=policy)
    limit -= len(probes.deliveries)
    if limit <= 0:
        return Claim(probes.deliveries, set())
    skip = {*skip_endpoints, *probes.paused}
    if due is None:
        due = due_endpoints(bounds=bounds)
    candidates = [e for e in due if e.id not in skip]
    shares = fair_shares(
        limit=limit,
        endpoints=candidates,
        room=lambda e: limit if room is None else room(e),
        rotation=rotation,
        tenant_room=tenant_room,
    )
    claim = deliveries_claim_shares(
        shares=shares,
        policy=policy,
        first_attempts_only=first_attempts_only,
        retries_only=retries_only,
        bounds=bounds,
    )
    return Claim(probes.deliveries + claim.deliveries, claim.exhausted)


@dataclass(frozen=True, slots=True)
class Probes:
    """Endpoints whose circuit is not closed (claims leave them alone), and the probe
    deliveries this claim won for those whose time had come."""

    paused: set[str]
    deliveries: list[Claimed]


def deliveries_claim_probes(*, limit: int, policy: Policy) -> Probes:
    """One probe per open circuit whose time has come (at most `limit`), each a real
    waiting delivery: none due means the next probe is later."""
    paused, probes = open_circuits_claim_probes()
    shares = {endpoint_id: 1 for endpoint_id in probes[:limit]}
    rows = _claim(shares, ANY_ATTEMPT, policy, EVERY_PARTITION)
    return Probes(paused, _with_endpoints(rows))


def deliveries_claim_shares(
    *,
    shares: dict[str, int],
    policy: Policy,
    first_attempts_only: bool = False,
    retries_only: bool = False,
    bounds: ClaimBounds = EVERY_PARTITION,
) -> Claim:
    """Claim at most `shares[endpoint]` due rows of each endpoint, oldest first.
    `first_attempts_only` or `retries_only`: the worker's retry budget decides. `bounds`:
    the delivery and event ids to look between (lifecycle.partitions.claim_bounds)."""
    attempts = ANY_ATTEMPT
    if first_attempts_only or retries_only:
        attempts = {"any_attempt": False, "first_attempts": first_attempts_only}
    rows = _claim(shares, attempts, policy, bounds)
    got = Counter(row[3] for row in rows)
    exhausted = {endpoint for endpoint, share in shares.items() if got[endpoint] < share}
    return Claim(_with_endpoints(rows), exhausted)


def due_endpoints(
    *, after: str = "", limit: int = DUE_ENDPOINTS_LIMIT, bounds: ClaimBounds = EVERY_PARTITION
) -> list[DueEndpoint]:
    """Active endpoints with a closed circuit and at least one delivery due now, in id order
    from `after` on: a caller that gets `limit` of them asks next from the last one, so
    beyond `limit` endpoints every one still has its turn.

    On PostgreSQL a skip scan of the `delivery_endpoint_due` index: one probe per
    endpoint with pending deliveries finds its earliest one, whatever the depth of its
    backlog, so a 100,000-deep backlog costs one probe, not a scan (DESIGN decision 12).
    `bounds`: the delivery ids to look between (lifecycle.partitions.claim_bounds)."""
    if connection.vendor != "postgresql":
        return [DueEndpoint(*row) for row in claims_sqlite.due_endpoints(after=after, limit=limit)]
    with connection.cursor() as cursor:
        params: dict[str, Any] = {"after": after, "limit": limit}
        params.update(floor=bounds.floor, ceiling=bounds.ceiling)
        cursor.execute(claim_sql.on(claim_sql.DUE_ENDPOINTS, bounds.deliveries), params)
        return [DueEndpoint(*row) for row in cursor.fetchall()]


def deliveries_due_exist() -> bool:
    """Whether any delivery is due: a read, so an idle worker's poll takes no write lock."""
    return Delivery.objects.filter(PENDING_IN_TIME_ORDER, next_attempt_at__lte=Now()).exists()


def deliveries_give_back(
    *, deliveries: Sequence[InHand], delay: timedelta = timedelta(0), last_error: str | None = None
) -> None:
    """Undo a claim without an attempt: the deliveries are due again after `delay`
    (at once by default); `last_error` says why they wait, when it is worth saying.
    Only those this claim still holds (see `_held_by`)."""
    changes: dict[str, Any] = {} if last_error is None else {"last_error": last_error[:500]}
    held = [(d.id, d.attempt_count) for d in deliveries]
    Delivery.objects.filter(_held_by(held)).update(
        status=Delivery.Status.PENDING,
        lease_expires_at=None,
        attempt_count=F("attempt_count") - 1,
        next_attempt_at=ExpressionWrapper(Now() + delay, output_field=DateTimeField()),
        updated_at=timezone.now(),
        **changes,
    )


def deliveries_renew_leases(*, held: Sequence[tuple[str, int]], lease_seconds: float) -> int:
    """A fresh lease (from the database's clock) for each (delivery id, claim's
    attempt_count) still held by that claim, in one statement: an attempt that takes
    longer than its lease (a slow recorder, a database pause) is not claimed and sent
    again meanwhile. How many were renewed."""
    if not held:
        return 0
    lease = timedelta(seconds=lease_seconds)
    return Delivery.objects.filter(_held_by(held)).update(
        lease_expires_at=ExpressionWrapper(Now() + lease, output_field=DateTimeField())
    )


def _held_by(held: Sequence[tuple[str, int]]) -> Q:
    """Rows still under the leases these claims took: `delivering`, with the attempt
    number the claim gave them (a claim after a lapsed lease numbers the next attempt,
    so a late give-back, renewal or record from the earlier one changes nothing)."""
    by_count: dict[int, list[str]] = {}
    for delivery_id, attempt_count in held:
        by_count.setdefault(attempt_count, []).append(delivery_id)
    if not by_count:
        return Q(pk__in=[])
    either = functools.reduce(
        operator.or_, (Q(pk__in=ids, attempt_count=n) for n, ids in by_count.items())
    )
    return either & Q(status=Delivery.Status.DELIVERING)


def _claim(
    shares: dict[str, int], attempts: dict[str, bool], policy: Policy, bounds: ClaimBounds
) -> list:
    """Claim `shares[endpoint]` due rows (at most) of each endpoint, oldest first: the
    rows the statement returned (claim_sql.CLAIM), each ending with its event in hand."""
    if not shares:
        return []
    if connection.vendor != "postgresql":
        return claims_sqlite.claim(shares, attempts, policy.lease_seconds)
    params: dict[str, Any] = {
        "endpoint_ids": list(shares),
        "shares": list(shares.values()),
        "lease_seconds": policy.lease_seconds,
        "floor": bounds.floor,
        "event_floor": bounds.event_floor,
        "ceiling": bounds.ceiling,
        "event_ceiling": bounds.event_ceiling,
        **attempts,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(claim_sql.on(claim_sql.CLAIM, bounds.deliveries), params)
        # jsonb comes back as text (Django's loader): decoded here, once per delivery.
        return [
            (*row[:9], EventInHand(row[2], row[9], json.loads(row[10]), row[11], row[12]))
            for row in cursor.fetchall()
        ]


def _with_endpoints(rows: list[tuple[Any, ...]]) -> list[Claimed]:
    if not rows:
        return []
    # all_objects: an endpoint deleted since the claim is still read, found inactive,
    # and its deliveries recorded unsent.
    endpoints = _endpoints({row[3] for row in rows})
    settings = {e.id: send_settings(endpoint=e) for e in endpoints.values()}
    claimed = []
    for row in rows:
        delivery_id, tenant_id, _, endpoint_id, attempt_count, offset, sequence = row[:7]
        # An endpoint deleted since the claim took its deliveries with it (cascade).
        if endpoint_id not in endpoints:
            continue
        claimed.append(
            Claimed(
                id=delivery_id,
                tenant_id=tenant_id,
                endpoint_id=endpoint_id,
                attempt_count=attempt_count,
                schedule_offset=offset,
                sequence=sequence,
                event=row[9],
                endpoint=endpoints[endpoint_id],
                send=settings[endpoint_id],
                ordering_key=row[7],
                head_since=row[8],
            )
        )
    return claimed


def _endpoints(ids: set[str]) -> dict[str, Endpoint]:
    """The endpoints by id, deleted ones included (claim_sql.ENDPOINTS)."""
    if connection.vendor == "postgresql":
        found = Endpoint.all_objects.raw(claim_sql.ENDPOINTS, [sorted(ids)])
    else:
        found = Endpoint.all_objects.raw(claims_sqlite.ENDPOINTS, [json.dumps(sorted(ids))])
    return {endpoint.id: endpoint for endpoint in found}
