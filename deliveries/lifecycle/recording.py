"""Recording attempts: the attempt rows and each delivery's next state, in batches.

The one way an attempt is recorded, used by the worker's recorder and by the lease
sweep (`worker lost`). Whatever a receiver answered, it cannot stop a batch from being
written, so it cannot hold up other tenants' results:
- every value is made storable first: NUL bytes (PostgreSQL text refuses them) become
  U+FFFD, every text is clipped to its column, numbers to theirs;
- a batch is written in one transaction (one statement for the states on PostgreSQL,
  one for the attempts: record_sql.py);
- if it still fails for a reason other than the database being unavailable, each row is
  written on its own, and a row that cannot be written is stored as a "could not
  record" attempt instead. A result is never dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from core import counters
from core.clock import database_now
from deliveries.lifecycle import retry
from deliveries.lifecycle.attempt_stats import (
    attempt_duration_counts,
    attempt_minutes_add,
    endpoint_minutes_add,
)
from deliveries.lifecycle.health import (
    GONE_REASON,
    HealthChanges,
    Operational,
    Result,
    delivery_dead_event,
    endpoints_health_record,
    endpoints_ramp,
    operational_events_emit,
)
from deliveries.lifecycle.in_hand import InHand
from deliveries.lifecycle.ordering import deliveries_release_next, max_block_verdict
from deliveries.lifecycle.outcomes import NextState, next_state
from deliveries.lifecycle.policy import Policy
from deliveries.lifecycle.record_sql import (
    APPLY_STATES,
    APPLY_STATES_IF_LEASE_EXPIRED,
    INSERT_ATTEMPTS,
    INSERT_ATTEMPTS_IGNORING_CONFLICTS,
)
from deliveries.log_context import delivery_log_context
from deliveries.models import Attempt, Delivery
from deliveries.results import ErrorKind, SendResult
from deliveries.signals import deliveries_died_send

logger = logging.getLogger(__name__)

FINISHED = (Delivery.Status.SUCCEEDED, Delivery.Status.DEAD)
TEXT_LIMIT = 500  # Attempt.error, Delivery.last_error, DeadLetter.reason
STATUS_CODE_MAX = 32767  # PositiveSmallIntegerField
DURATION_MAX = 2**31 - 1
COULD_NOT_RECORD = "could not record the attempt"
# Failures that say nothing about the receiver: they spend the attempt but leave the
# endpoint's health (consecutive failures, circuit) as it was.
NOT_THE_ENDPOINTS = frozenset({ErrorKind.PROXY, ErrorKind.KEY})
# How long one recording transaction waits for a row lock another transaction holds (an
# endpoint or delivery row locked by a long admin action, say): then it fails as if the
# database were unavailable, and the recorder tries again within its patience, its
# leases renewed meanwhile, instead of waiting for as long as the other one likes.
LOCK_TIMEOUT = "5s"
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


@dataclass(frozen=True)
class Attempted:
    """What was sent (None: nothing, the endpoint was deactivated) and when."""

    delivery: InHand
    result: SendResult | None
    started_at: datetime
    policy: Policy


@dataclass(frozen=True)
class Recorded:
    delivery_id: str
    outcome: retry.Outcome
    sent: bool
    deactivate_endpoint: str | None = None  # the endpoint a 410 (or its health) deactivates
    deactivate_reason: str = ""  # its disabled_reason


def storable(text: str | None, limit: int | None = TEXT_LIMIT) -> str:
    """`text` as PostgreSQL will store it: no NUL, no lone surrogate, within `limit`."""
    if not text:
        return ""
    clean = text.replace("\x00", "\ufffd")
    clean = clean.encode("utf-8", "replace").decode("utf-8")
    return clean if limit is None else clean[:limit]


def storable_result(result: SendResult) -> SendResult:
    """The result with every value fitting its column (the receiver chose most of them)."""
    status, error, kind = result.status_code, result.error, result.error_kind
    if status is not None and not 0 <= status <= STATUS_CODE_MAX:
        status, kind = None, retry.ErrorKind.CONNECTION
        error = f"connection error: invalid status code {result.status_code}"
    return SendResult(
        status_code=status,
        error=storable(error) or None,
        response_body=result.response_body,
        retry_after=storable(result.retry_after, 200) or None,
        duration_ms=min(max(result.duration_ms, 0), DURATION_MAX),
        error_kind=kind,
    )


def attempts_record(
    *, outcomes: Sequence[Attempted], expired_only: bool = False
) -> list[Recorded | None]:
    """Write attempts and next states; None for a delivery this claim no longer holds.

    `expired_only` (the lease sweep): take a delivery only if its lease has expired, so
    a worker recording at the same moment wins. Raises only when the database is
    unavailable; any other failure falls back to writing row by row.
    """
    outcomes = [
        Attempted(
            o.delivery, storable_result(o.result) if o.result else None, o.started_at, o.policy
        )
        for o in outcomes
    ]
    try:
        recorded = _write_batch(outcomes, expired_only)
    except DATABASE_UNAVAILABLE:
        raise
    except Exception:
        logger.exception("recording a batch of %d attempts failed; row by row", len(outcomes))
        recorded = [_write_row(outcome, expired_only) for outcome in outcomes]
    _count(outcomes, recorded)
    return recorded


def _write_batch(outcomes: list[Attempted], expired_only: bool) -> list[Recorded | None]:
    now = database_now()
    states = [_state_for(o, now) for o in outcomes]
    recorded: list[Recorded | None] = []
    attempts, dead = [], []
    finished_in_line: list[str] = []
    results: list[Result] = []
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = %s", [LOCK_TIMEOUT])
        applied = _apply_states([o.delivery for o in outcomes], states, now, expired_only)
        for outcome, state in zip(outcomes, states, strict=True):
            delivery = outcome.delivery
            if delivery.id not in applied:
                recorded.append(None)  # our lease lapsed; the scheduler took it back
                continue
            if outcome.result is not None:
                attempts.append(_attempt_row(delivery, outcome.result, outcome.started_at))
                if outcome.result.error_kind not in NOT_THE_ENDPOINTS:
                    results.append(
                        Result(
                            delivery.endpoint_id,
                            delivery.event.type,
                            state.outcome,
                            outcome.started_at,
                        )
                    )
            recorded.append(_recorded(outcome, state))
            if state.dead_reason:
                dead.append((delivery, storable(state.dead_reason)))
            if delivery.ordering_key is not None and state.fields["status"] in FINISHED:
                finished_in_line.append(delivery.id)
        # The next of each finished one's key goes now (ordering.py), in this transaction.
        deliveries_release_next(finished=finished_in_line, now=now)
        _attempts_insert(attempts, ignore_conflicts=expired_only)
        if dead:
            deliveries_died_send(
                deliveries=[d for d, _ in dead],
                reasons=[r for _, r in dead],
                dead_at=now,
            )
        # A worker that died says nothing about the endpoint: the sweep leaves health be.
        health = (
            HealthChanges([], {})
            if expired_only
            else endpoints_health_record(results=results, now=now)
        )
    _emit(health, dead)
    endpoints_ramp(changes=health)
    return _with_deactivations(outcomes, recorded, health.deactivate)


def _emit(health: HealthChanges, dead: list[tuple[InHand, str]]) -> None:
    events: list[Operational | None] = list(health.events)
    for delivery, reason in dead:
        events.append(
            delivery_dead_event(
                tenant_id=delivery.tenant_id,
                delivery_id=delivery.id,
                event_id=delivery.event_id,
                endpoint_id=delivery.endpoint_id,
                event_type=delivery.event.type,
                reason=reason,
            )
        )
    operational_events_emit(events=[e for e in events if e is not None])


def _with_deactivations(
    outcomes: list[Attempted], recorded: list[Recorded | None], deactivate: dict[str, str]
) -> list[Recorded | None]:
    """Each endpoint its health deactivates, named on one of its recorded attempts."""
    pending = dict(deactivate)
    out: list[Recorded | None] = []
    for outcome, item in zip(outcomes, recorded, strict=True):
        endpoint_id = outcome.delivery.endpoint_id
        if item is not None and item.deactivate_endpoint is None and endpoint_id in pending:
            item = replace(
                item, deactivate_endpoint=endpoint_id, deactivate_reason=pending.pop(endpoint_id)
            )
        out.append(item)
    return out


def _write_row(outcome: Attempted, expired_only: bool) -> Recorded | None:
    """One outcome in its own transaction; if even that fails, a "could not record"
    attempt with the delivery's next state still decided by what the receiver said."""
    try:
        return _write_batch([outcome], expired_only)[0]
    except DATABASE_UNAVAILABLE:
        raise
    except Exception:
        logger.exception(
            "could not record attempt of delivery %s",
            outcome.delivery.id,
            extra=delivery_log_context(outcome.delivery),
        )
    result = outcome.result
    if result is None:
        return None
    placeholder = SendResult(
        status_code=result.status_code,
        error=None if result.status_code is not None else COULD_NOT_RECORD,
        response_body=COULD_NOT_RECORD.encode() if result.status_code is not None else b"",
        retry_after=None,
        duration_ms=result.duration_ms,
        error_kind=result.error_kind,
    )
    try:
        return _write_batch(
            [Attempted(outcome.delivery, placeholder, outcome.started_at, outcome.policy)],
            expired_only,
        )[0]
    except DATABASE_UNAVAILABLE:
        raise
    except Exception:
        # Nothing about this row can be stored: its lease expires and the sweep
        # records it as `worker lost` (at least once).
        logger.exception(
            "gave up recording delivery %s",
            outcome.delivery.id,
            extra=delivery_log_context(outcome.delivery),
        )
        return None


def _recorded(outcome: Attempted, state: NextState) -> Recorded:
    return Recorded(
        outcome.delivery.id,
        state.outcome,
        sent=outcome.result is not None,
        deactivate_endpoint=outcome.delivery.endpoint_id if state.deactivate_endpoint else None,
        deactivate_reason=GONE_REASON if state.deactivate_endpoint else "",
    )


def _state_for(outcome: Attempted, now: datetime) -> NextState:
    delivery, result = outcome.delivery, outcome.result
    if result is None:  # nothing was sent: the claim's attempt number is given back
        reason = "endpoint deactivated"
        return NextState(
            retry.Outcome.FATAL,
            {
                "status": Delivery.Status.DEAD,
                "next_attempt_at": None,
                "lease_expires_at": None,
                "last_error": reason,
                "attempt_count": delivery.attempt_count - 1,
            },
            dead_reason=reason,
        )
    state = next_state(delivery=delivery, result=result, policy=outcome.policy, now=now)
    state.fields["last_error"] = storable(state.fields["last_error"])
    if delivery.ordering_key is not None and state.fields["status"] == Delivery.Status.PENDING:
        state = _within_max_block(delivery, state, now, outcome.policy)
    return state


def _within_max_block(
    delivery: InHand, state: NextState, now: datetime, policy: Policy
) -> NextState:
    """A failing first of its key's line is retried no later than its
    HOMING_ORDERING_MAX_BLOCK, and dies once that has passed: the key moves on."""
    due, reason = max_block_verdict(
        head_since=delivery.head_since,
        now=now,
        due=state.fields["next_attempt_at"],
        max_block=policy.ordering_max_block,
    )
    if reason is None:
        return replace(state, fields={**state.fields, "next_attempt_at": due})
    return NextState(
        state.outcome,
        {
            "status": Delivery.Status.DEAD,
            "next_attempt_at": None,
            "lease_expires_at": None,
            "last_error": reason,
        },
        dead_reason=reason,
    )


def _apply_states(
    deliveries: list[InHand], states: list[NextState], now: datetime, expired_only: bool
) -> set[str]:
    """Write each delivery's next state if this claim still holds it; returns those ids."""
    if connection.vendor == "postgresql":
        return _apply_states_at_once(deliveries, states, now, expired_only)
    applied = set()
    for delivery, state in zip(deliveries, states, strict=True):
        held = Delivery.objects.filter(
            pk=delivery.id, status=Delivery.Status.DELIVERING, attempt_count=delivery.attempt_count
        )
        if expired_only:
            held = held.filter(lease_expires_at__lt=now)
        if held.update(**state.fields, updated_at=now):
            applied.add(delivery.id)
    return applied


def _apply_states_at_once(
    deliveries: list[InHand], states: list[NextState], now: datetime, expired_only: bool
) -> set[str]:
    # One statement for the whole batch instead of one UPDATE per delivery (record_sql.py).
    rows = []
    for delivery, state in zip(deliveries, states, strict=True):
        due = state.fields["next_attempt_at"]
        rows.append(
            {
                "id": delivery.id,
                "claimed_count": delivery.attempt_count,
                "status": state.fields["status"],
                "delay": None if due is None else (due - now).total_seconds(),
                "last_error": state.fields["last_error"],
                "new_count": state.fields.get("attempt_count", delivery.attempt_count),
            }
        )
    sql = APPLY_STATES_IF_LEASE_EXPIRED if expired_only else APPLY_STATES
    with connection.cursor() as cursor:
        ids = [row["id"] for row in rows]
        bounds = {"lowest": min(ids, default=""), "highest": max(ids, default="")}
        cursor.execute(sql, {"now": now, "states": _json(rows), **bounds})
        return {row[0] for row in cursor.fetchall()}


def _attempts_insert(attempts: list[dict[str, Any]], *, ignore_conflicts: bool) -> None:
    """The attempt rows: on PostgreSQL one statement with one JSON parameter (as the
    states), elsewhere through the ORM."""
    if not attempts:
        return
    if connection.vendor != "postgresql":
        Attempt.objects.bulk_create(
            [Attempt(**row) for row in attempts], ignore_conflicts=ignore_conflicts
        )
        return
    sql = INSERT_ATTEMPTS_IGNORING_CONFLICTS if ignore_conflicts else INSERT_ATTEMPTS
    with connection.cursor() as cursor:
        cursor.execute(sql, {"attempts": _json(attempts)})


def _json(rows: list[dict[str, Any]]) -> str:
    # Every text was made storable first: no NUL (json_to_recordset refuses \u0000 in
    # text), no lone surrogate; the rest is kept as UTF-8.
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"), default=str)


def _attempt_row(delivery: InHand, result: SendResult, started_at: datetime) -> dict[str, Any]:
    return {
        "delivery_id": delivery.id,
        "number": delivery.attempt_count,
        "started_at": started_at,
        "duration_ms": result.duration_ms,
        "status_code": result.status_code,
        "error": storable(result.error),
        "response_body": storable(result.response_body.decode("utf-8", errors="replace"), None),
    }


def _count(outcomes: list[Attempted], recorded: list[Recorded | None]) -> None:
    counts: dict[str, int] = {}
    by_endpoint: list[tuple[str, str, int]] = []
    for outcome, item in zip(outcomes, recorded, strict=True):
        if item is not None and item.sent and outcome.result is not None:
            name = item.outcome.value  # an enum's value is a property: read once
            counts[name] = counts.get(name, 0) + 1
            by_endpoint.append((outcome.delivery.endpoint_id, name, outcome.result.duration_ms))
    if not counts:
        return
    counters.increment_many(
        {
            **{f"attempts_{name}": n for name, n in counts.items()},
            **attempt_duration_counts(by_endpoint),  # homing_attempt_duration_seconds
        }
    )
    now = timezone.now()
    try:
        with transaction.atomic():  # one commit for both figures, not one each
            attempt_minutes_add(counts=counts, at=now)
            endpoint_minutes_add(attempts=by_endpoint, at=now)
    except Exception:
        # The batch has committed: a failed chart figure must not make the recorder
        # write it again (the second run would find no claim and drop its effects).
        logger.warning("could not add %s to the attempts per minute", counts, exc_info=True)
