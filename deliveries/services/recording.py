"""Recording attempts: the attempt rows and each delivery's next state, in batches.

Results arrive from the sending threads one by one; a single recorder thread per
worker process writes whatever has arrived in one transaction. Sending threads then
never wait on the database, a slow attempt never delays recording a fast one, and a
busy worker writes many results per transaction.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils import timezone

from core import counters
from deliveries import retry
from deliveries.models import Attempt, Delivery
from deliveries.policy import Policy
from deliveries.sender import SendResult
from deliveries.services.attempt_stats import attempt_minutes_add
from deliveries.services.claims import Claimed
from deliveries.services.lifecycle import endpoint_deactivate
from deliveries.services.outcomes import NextState, next_state
from dlq.services.dead_letters import dead_letters_create

logger = logging.getLogger(__name__)

MAX_BATCH = 200  # results written per transaction at most
# A failed write (PostgreSQL restarting) is tried again for about this long; after
# that the leases expire and the scheduler retries the deliveries (at least once).
WRITE_PATIENCE_SECONDS = 30


@dataclass(frozen=True)
class Outcome:
    """What was sent (None: nothing, the endpoint was deactivated) and when."""

    delivery: Claimed
    result: SendResult | None
    started_at: datetime
    policy: Policy


@dataclass(frozen=True)
class Recorded:
    delivery_id: str
    outcome: retry.Outcome
    sent: bool


class Recorder:
    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Outcome, Future[Recorded | None]]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="homing-recorder", daemon=True)
        self._thread.start()

    def submit(self, outcome: Outcome) -> Future[Recorded | None]:
        future: Future[Recorded | None] = Future()
        self._queue.put((outcome, future))
        return future

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            recorded = self._write_with_patience([outcome for outcome, _ in batch])
            for (_, future), item in zip(batch, recorded, strict=True):
                future.set_result(item)

    def _write_with_patience(self, outcomes: list[Outcome]) -> list[Recorded | None]:
        deadline = time.monotonic() + WRITE_PATIENCE_SECONDS
        while True:
            try:
                close_old_connections()
                return record_outcomes(outcomes)
            except DatabaseError:
                connection.close()
                if time.monotonic() > deadline:
                    logger.exception(
                        "gave up recording %d attempts; their leases will "
                        "expire and the scheduler retries them",
                        len(outcomes),
                    )
                    return [None] * len(outcomes)
                logger.warning("database unavailable while recording; retrying")
                time.sleep(1)
            except Exception:
                logger.exception("recording %d attempts failed", len(outcomes))
                return [None] * len(outcomes)


def record_outcomes(outcomes: list[Outcome]) -> list[Recorded | None]:
    """Write attempts and next states; None for a delivery this claim no longer holds."""
    now = timezone.now()
    recorded: list[Recorded | None] = []
    attempts: list[Attempt] = []
    dead: list[tuple[Claimed, str]] = []
    deactivate: set[str] = set()
    states = [_state_for(item.delivery, item.result, item.policy, now) for item in outcomes]
    with transaction.atomic():
        applied = _apply_states([item.delivery for item in outcomes], states, now)
        for item, state in zip(outcomes, states, strict=True):
            delivery, result = item.delivery, item.result
            if delivery.id not in applied:
                recorded.append(None)  # our lease lapsed; the scheduler took it back
                continue
            if result is not None:
                attempts.append(_attempt_row(delivery, result, item.started_at))
            recorded.append(Recorded(delivery.id, state.outcome, sent=result is not None))
            if state.dead_reason:
                dead.append((delivery, state.dead_reason))
            if state.deactivate_endpoint:
                deactivate.add(delivery.endpoint_id)
        Attempt.objects.bulk_create(attempts)
        if dead:
            dead_letters_create(
                deliveries=[d for d, _ in dead], reasons=[r for _, r in dead], dead_at=now
            )
    for endpoint_id in deactivate:
        endpoint_deactivate(endpoint_id=endpoint_id)
    counts = _outcome_counts(recorded)
    counters.increment_many(counts)
    attempt_minutes_add(
        counts={name.removeprefix("attempts_"): n for name, n in counts.items()}, at=now
    )
    return recorded


def _state_for(
    delivery: Claimed, result: SendResult | None, policy: Policy, now: datetime
) -> NextState:
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
    return next_state(delivery=delivery, result=result, policy=policy, now=now)


def _apply_states(deliveries: list[Claimed], states: list[NextState], now: datetime) -> set[str]:
    """Write each delivery's next state if this claim still holds it; returns those ids."""
    if connection.vendor == "postgresql":
        return _apply_states_at_once(deliveries, states, now)
    applied = set()
    for delivery, state in zip(deliveries, states, strict=True):
        if Delivery.objects.filter(
            pk=delivery.id,
            status=Delivery.Status.DELIVERING,
            attempt_count=delivery.attempt_count,
        ).update(**state.fields, updated_at=now):
            applied.add(delivery.id)
    return applied


def _apply_states_at_once(
    deliveries: list[Claimed], states: list[NextState], now: datetime
) -> set[str]:
    # One statement for the whole batch instead of one UPDATE per delivery: the
    # recorder's main cost at high throughput.
    rows, params = [], []
    for delivery, state in zip(deliveries, states, strict=True):
        rows.append("(%s::text, %s::int, %s::text, %s::timestamptz, %s::text, %s::int)")
        params += [
            delivery.id,
            delivery.attempt_count,
            state.fields["status"],
            state.fields["next_attempt_at"],
            state.fields["last_error"],
            state.fields.get("attempt_count", delivery.attempt_count),
        ]
    table = Delivery._meta.db_table
    sql = f"""
        UPDATE {table} AS d SET status = v.status, next_attempt_at = v.next_attempt_at,
            lease_expires_at = NULL, last_error = v.last_error, attempt_count = v.new_count,
            updated_at = %s
        FROM (VALUES {", ".join(rows)})
            AS v(id, claimed_count, status, next_attempt_at, last_error, new_count)
        WHERE d.id = v.id AND d.status = 'delivering' AND d.attempt_count = v.claimed_count
        RETURNING d.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, *params])
        return {row[0] for row in cursor.fetchall()}


def _attempt_row(delivery: Claimed, result: SendResult, started_at: datetime) -> Attempt:
    return Attempt(
        delivery_id=delivery.id,
        number=delivery.attempt_count,
        started_at=started_at,
        duration_ms=result.duration_ms,
        status_code=result.status_code,
        error=(result.error or "")[:500],
        response_body=result.response_body.decode("utf-8", errors="replace"),
    )


def _outcome_counts(recorded: list[Recorded | None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in recorded:
        if item is not None and item.sent:
            name = f"attempts_{item.outcome.value}"
            counts[name] = counts.get(name, 0) + 1
    return counts
