"""Endpoint health: consecutive failures, the circuit breaker, auto-deactivation and the
operational events that tell a tenant about them (CONTRACT sections 2 and 4).

The recording service hands over each batch's results; per endpoint they become one
conditional UPDATE (the rows are locked once for the whole batch), not one per attempt.
A circuit that opens keeps its endpoint's deliveries out of claims (worker/claims.py reads the
small set of endpoints whose circuit is not closed) until `probe_at`; then one claim wins
the conditional move to `half_open` and sends one real waiting delivery as the probe.

Operational events (`homing.*`) are emitted after the batch commits, through the normal
ingestion service, never to the endpoint they are about; a `homing.*` delivery's own
results count for nothing here, so they cannot loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q

from core.clock import database_now
from deliveries.lifecycle import retry
from deliveries.lifecycle.record_sql import (
    ANY_CIRCUIT_NOT_CLOSED,
    ENDPOINTS_NOT_CLOSED,
    ENDPOINTS_NOT_CLOSED_SQLITE,
    FAILURES_RESET,
    FAILURES_RESET_SQLITE,
)
from deliveries.signals import endpoints_answered_send, operational_events_send
from webhooks.models import Endpoint
from webhooks.services.event_input import RESERVED_TYPE_PREFIX

logger = logging.getLogger(__name__)

CIRCUIT_OPENED = "homing.endpoint.circuit_opened"
RECOVERED = "homing.endpoint.recovered"
DISABLED = "homing.endpoint.disabled"
DELIVERY_DEAD = "homing.delivery.dead"
GONE_REASON = "HTTP 410 Gone"


@dataclass(frozen=True)
class Result:
    """One recorded attempt, as health sees it."""

    endpoint_id: str
    event_type: str
    outcome: retry.Outcome
    started_at: datetime


@dataclass(frozen=True)
class Operational:
    """An operational event to emit once the batch has committed."""

    tenant_id: str
    type: str
    data: dict[str, Any]
    about_endpoint_id: str


@dataclass
class HealthChanges:
    events: list[Operational]
    deactivate: dict[str, str]  # endpoint id -> disabled_reason
    recovered: list[str] = field(default_factory=list)  # circuits closed by this batch
    succeeded: list[str] = field(default_factory=list)  # endpoints with a success in it


def endpoints_ramp(*, changes: HealthChanges) -> None:
    """After the batch commits: a recovered endpoint starts at a few attempts in flight,
    and each successful batch doubles that (the worker's concurrency.py, told through
    `endpoints_answered`), so its backlog does not slam it the moment it is back."""
    growing = [e for e in changes.succeeded if e not in changes.recovered]
    endpoints_answered_send(recovered=changes.recovered, succeeded=growing)


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def endpoints_health_record(*, results: Sequence[Result], now: datetime) -> HealthChanges:
    """Update the health of the endpoints in `results` (call inside the batch's
    transaction); returns the events to emit and the endpoints to deactivate."""
    changes = HealthChanges([], {})
    per_endpoint: dict[str, list[Result]] = {}
    for result in sorted(results, key=lambda r: r.started_at):
        if not result.event_type.startswith(RESERVED_TYPE_PREFIX):
            per_endpoint.setdefault(result.endpoint_id, []).append(result)
    if not per_endpoint:
        return changes
    healthy = _record_successes_of_healthy_endpoints(per_endpoint, changes)
    to_lock = sorted(set(per_endpoint) - healthy)
    if not to_lock:
        return changes
    locked = Endpoint.objects.select_for_update().filter(pk__in=to_lock)
    for endpoint in locked.only(
        "id", "tenant_id", "url", "is_active", "circuit_state", "consecutive_failures",
        "failing_since", "probe_at",
    ):  # fmt: skip
        _apply(endpoint, per_endpoint[endpoint.id], now, changes)
    return changes


def _record_successes_of_healthy_endpoints(
    per_endpoint: dict[str, list[Result]], changes: HealthChanges
) -> set[str]:
    """Endpoints whose results are all successes and whose circuit is closed: the usual
    case, settled without a row lock (recorders of every worker would queue on it, one
    batch at a time): one conditional UPDATE resets those that were failing. Returns
    them; the others go through the locked path."""
    all_ok = {
        endpoint_id
        for endpoint_id, results in per_endpoint.items()
        if all(r.outcome is retry.Outcome.SUCCESS for r in results)
    }
    if not all_ok:
        return set()
    # Plain SQL (record_sql.py says what each statement leaves alone): this runs for
    # every recorded batch, and compiling the two querysets cost more than running them.
    postgresql = connection.vendor == "postgresql"
    not_closed = ENDPOINTS_NOT_CLOSED if postgresql else ENDPOINTS_NOT_CLOSED_SQLITE
    with connection.cursor() as cursor:
        cursor.execute(not_closed, {"ids": _ids(all_ok, postgresql=postgresql)})
        healthy = all_ok - {row[0] for row in cursor.fetchall()}
        if healthy:
            reset = FAILURES_RESET if postgresql else FAILURES_RESET_SQLITE
            cursor.execute(reset, {"ids": _ids(healthy, postgresql=postgresql)})
    if healthy:
        changes.succeeded.extend(sorted(healthy))
    return healthy


def _ids(ids: set[str], *, postgresql: bool) -> list[str] | str:
    """The `%(ids)s` of record_sql's statements: an array on PostgreSQL, a JSON array
    (for json_each) on SQLite."""
    return sorted(ids) if postgresql else json.dumps(sorted(ids))


def _apply(
    endpoint: Endpoint, results: list[Result], now: datetime, changes: HealthChanges
) -> None:
    success_at = max(
        (i for i, r in enumerate(results) if r.outcome is retry.Outcome.SUCCESS), default=None
    )
    after = results if success_at is None else results[success_at + 1 :]
    retryable = sum(1 for r in after if r.outcome is retry.Outcome.RETRYABLE)
    first_failure = after[0].started_at if after else None
    if success_at is None:
        failures = endpoint.consecutive_failures + retryable
        failing_since = endpoint.failing_since or first_failure
    else:
        failures, failing_since = retryable, first_failure
    old_state, state, probe_at = endpoint.circuit_state, endpoint.circuit_state, endpoint.probe_at
    probe_interval = timedelta(seconds=settings.HOMING_CIRCUIT_PROBE_INTERVAL)
    if success_at is not None and old_state != Endpoint.Circuit.CLOSED:
        state, probe_at = Endpoint.Circuit.CLOSED, None
        changes.events.append(_endpoint_event(RECOVERED, endpoint, "succeeded", None))
        changes.recovered.append(endpoint.id)
    if success_at is not None:
        changes.succeeded.append(endpoint.id)
    if after and failures >= settings.HOMING_CIRCUIT_FAILURES:
        if state == Endpoint.Circuit.CLOSED:
            changes.events.append(
                _endpoint_event(
                    CIRCUIT_OPENED,
                    endpoint,
                    f"{failures} consecutive failures",
                    failing_since,
                )
            )
        if state != Endpoint.Circuit.OPEN or probe_at is None or probe_at <= now:
            # Opened now, or a probe failed: the next probe waits one interval.
            state, probe_at = Endpoint.Circuit.OPEN, now + probe_interval
    Endpoint.objects.filter(pk=endpoint.pk).update(
        circuit_state=state,
        consecutive_failures=failures,
        failing_since=failing_since,
        probe_at=probe_at,
    )
    deactivate_after = timedelta(seconds=settings.HOMING_DEACTIVATE_AFTER)
    if endpoint.is_active and after and failing_since and now - failing_since >= deactivate_after:
        changes.deactivate[endpoint.id] = f"failing since {iso(failing_since)}"


def _endpoint_event(
    event_type: str, endpoint: Endpoint, reason: str, failing_since: datetime | None
) -> Operational:
    return Operational(
        tenant_id=endpoint.tenant_id,
        type=event_type,
        data={
            "endpoint_id": endpoint.id,
            "url": endpoint.url,
            "reason": reason,
            "failing_since": iso(failing_since),
        },
        about_endpoint_id=endpoint.id,
    )


def endpoint_disabled_event(*, endpoint: Endpoint) -> Operational:
    return _endpoint_event(DISABLED, endpoint, endpoint.disabled_reason, endpoint.failing_since)


def delivery_dead_event(
    *,
    tenant_id: str,
    delivery_id: str,
    event_id: str,
    endpoint_id: str,
    event_type: str,
    reason: str,
) -> Operational | None:
    """`homing.delivery.dead`, unless the dead delivery carried an operational event."""
    if event_type.startswith(RESERVED_TYPE_PREFIX):
        return None
    return Operational(
        tenant_id=tenant_id,
        type=DELIVERY_DEAD,
        data={
            "delivery_id": delivery_id,
            "event_id": event_id,
            "endpoint_id": endpoint_id,
            "event_type": event_type,
            "reason": reason,
        },
        about_endpoint_id=endpoint_id,
    )


def operational_events_emit(*, events: Sequence[Operational]) -> None:
    """Announce operational events; intake ingests them as the tenants' own
    (intake/operational.py). They are news about deliveries already recorded: a failure
    is logged there, never raised here."""
    operational_events_send(events=events)


def open_circuits_claim_probes() -> tuple[set[str], list[str]]:
    """(endpoints whose deliveries claims leave alone, those whose probe may go now);
    each probe won by a conditional move to `half_open`, so two workers never both send
    one. Read through the partial index `endpoint_circuit`."""
    # Asked before every claim, and nearly always none: a plain read first (compiling
    # the queryset below cost more than the claim's own statement).
    with connection.cursor() as cursor:
        cursor.execute(ANY_CIRCUIT_NOT_CLOSED)
        if cursor.fetchone() is None:
            return set(), []
    now = database_now()
    paused: set[str] = set()
    due: list[str] = []
    # Inactive (or deleted) endpoints get no probe: they get no attempt at all.
    for pk, probe_at in Endpoint.objects.filter(
        ~Q(circuit_state=Endpoint.Circuit.CLOSED), is_active=True
    ).values_list("id", "probe_at"):
        paused.add(pk)
        if probe_at is None or probe_at <= now:
            due.append(pk)
    won = []
    interval = timedelta(seconds=settings.HOMING_CIRCUIT_PROBE_INTERVAL)
    for pk in due:
        # A lost probe (its worker died) is retried once the interval has passed.
        if (
            Endpoint.objects.filter(pk=pk)
            .filter(~Q(circuit_state=Endpoint.Circuit.CLOSED))
            .filter(Q(probe_at__isnull=True) | Q(probe_at__lte=now))
            .update(circuit_state=Endpoint.Circuit.HALF_OPEN, probe_at=now + interval)
        ):
            won.append(pk)
    return paused, won
