"""Claim due deliveries, send them in parallel, record the attempts (the worker's job).

Three steps, and no transaction or row lock is held across an HTTP call:
1. claim: one conditional UPDATE moves due `pending` rows to `delivering` with a lease;
   rows another worker already holds are skipped, so duplicate messages send nothing.
2. send: in a thread pool, each attempt bounded by HOMING_DELIVERY_TIMEOUT.
3. record: one transaction writes the attempts and each delivery's next state, only for
   rows still held under this claim.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from config.version import VERSION
from deliveries import retry
from deliveries.models import Attempt, Delivery
from deliveries.policy import Policy, current_policy
from deliveries.sender import Sender, SendResult
from deliveries.services.lifecycle import endpoint_deactivate
from deliveries.services.outcomes import NextState, next_state
from deliveries.signing import payload_bytes, webhook_headers
from dlq.services.dead_letters import dead_letters_create
from webhooks.services import counters
from webhooks.services.endpoints import endpoint_signing_secrets

logger = logging.getLogger(__name__)

# Deliveries one task claims at most: enough to amortise queries and Celery overhead,
# few enough that one batch's parallel sends fit in the send pool at once.
BATCH_SIZE = 25
# Threads sending at once in one worker process. Sends wait on the network, not the CPU.
SEND_THREADS = 200


@dataclass(frozen=True)
class Recorded:
    delivery_id: str
    outcome: retry.Outcome
    sent: bool


@functools.cache
def _sender() -> Sender:
    return Sender(
        version=VERSION, allow_private_networks=settings.HOMING_ALLOW_PRIVATE_NETWORKS, maxsize=32
    )


@functools.cache
def _send_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=SEND_THREADS, thread_name_prefix="homing-send")


def deliveries_attempt(*, delivery_ids: Sequence[str], take_more: bool = True) -> list[Recorded]:
    """Attempt these deliveries if they are due and free, plus (with `take_more`) other
    due deliveries up to a batch, so that a busy system sends in batches."""
    policy = current_policy()
    claimed = deliveries_claim(
        delivery_ids=delivery_ids, limit=BATCH_SIZE, policy=policy, take_more=take_more
    )
    if not claimed:
        return []
    deliveries = list(Delivery.objects.filter(pk__in=claimed).select_related("event", "endpoint"))
    started = timezone.now()
    results = list(_send_pool().map(functools.partial(_send, policy=policy), deliveries))
    return _record(deliveries, results, started=started, policy=policy)


def deliveries_claim(
    *, delivery_ids: Sequence[str], limit: int, policy: Policy, take_more: bool
) -> list[str]:
    now = timezone.now()
    lease_until = now + timedelta(seconds=policy.lease_seconds)
    claimed: list[str] = []
    if delivery_ids:
        ids = list(delivery_ids)[:limit]
        claimed += _claim_where(
            f"id IN ({', '.join(['%s'] * len(ids))})", ids, now, lease_until, limit
        )
    if take_more and len(claimed) < limit:
        claimed += _claim_where("TRUE", [], now, lease_until, limit - len(claimed))
    return claimed


def _claim_where(
    condition: str, params: list[str], now: datetime, lease_until: datetime, limit: int
) -> list[str]:
    table = Delivery._meta.db_table
    # SKIP LOCKED lets concurrent workers take disjoint rows instead of queueing on one
    # another; without it (SQLite) the outer status check still makes the claim exclusive.
    skip_locked = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    # Only constants and the model's table name are formatted in; values are parameters.
    sql = (
        f"UPDATE {table} SET status = 'delivering', lease_expires_at = %s, "
        f"attempt_count = attempt_count + 1, dispatched_until = NULL, updated_at = %s "
        f"WHERE id IN (SELECT id FROM {table} WHERE {condition} AND status = 'pending' "
        f"AND next_attempt_at <= %s ORDER BY next_attempt_at LIMIT %s{skip_locked}) "
        f"AND status = 'pending' RETURNING id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [lease_until, now, *params, now, limit])
        return [row[0] for row in cursor.fetchall()]


def _send(delivery: Delivery, *, policy: Policy) -> SendResult | None:
    """The attempt's result, or None when the endpoint was deactivated since the claim."""
    if not delivery.endpoint.is_active:
        return None
    event = delivery.event
    body = payload_bytes(
        event_id=event.id,
        event_type=event.type,
        timestamp_iso=event_timestamp(event.created_at),
        data=event.data,
    )
    headers = {
        **delivery.endpoint.headers,
        **webhook_headers(
            msg_id=event.id,
            timestamp=int(time.time()),
            body=body,
            secrets=endpoint_signing_secrets(endpoint=delivery.endpoint),
        ),
    }
    try:
        return _sender().send(
            url=delivery.endpoint.url, body=body, headers=headers, timeout=policy.timeout
        )
    except Exception as exc:  # a bug must not lose the claim's bookkeeping
        logger.exception("sending delivery %s failed unexpectedly", delivery.id)
        return SendResult(None, f"internal error: {type(exc).__name__}", b"", None, 0)


def event_timestamp(created_at: datetime) -> str:
    return created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _record(
    deliveries: list[Delivery],
    results: list[SendResult | None],
    *,
    started: datetime,
    policy: Policy,
) -> list[Recorded]:
    now = timezone.now()
    recorded: list[Recorded] = []
    attempts: list[Attempt] = []
    dead: list[tuple[Delivery, str]] = []
    deactivate: set[str] = set()
    with transaction.atomic():
        for delivery, result in zip(deliveries, results, strict=True):
            state = _state_for(delivery, result, policy, now)
            if not _apply(delivery, state, now):
                continue  # our lease lapsed and the scheduler took the delivery back
            if result is not None:
                attempts.append(_attempt_row(delivery, result, started))
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
    counters.increment_many(_outcome_counts(recorded))
    return recorded


def _state_for(
    delivery: Delivery, result: SendResult | None, policy: Policy, now: datetime
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


def _apply(delivery: Delivery, state: NextState, now: datetime) -> bool:
    updated = Delivery.objects.filter(
        pk=delivery.pk, status=Delivery.Status.DELIVERING, attempt_count=delivery.attempt_count
    ).update(**state.fields, updated_at=now)
    return updated == 1


def _attempt_row(delivery: Delivery, result: SendResult, started: datetime) -> Attempt:
    return Attempt(
        delivery_id=delivery.id,
        number=delivery.attempt_count,
        started_at=started,
        duration_ms=result.duration_ms,
        status_code=result.status_code,
        error=(result.error or "")[:500],
        response_body=result.response_body.decode("utf-8", errors="replace"),
    )


def _outcome_counts(recorded: list[Recorded]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in recorded:
        if not item.sent:
            continue
        name = f"attempts_{item.outcome.value}"
        counts[name] = counts.get(name, 0) + 1
    return counts
