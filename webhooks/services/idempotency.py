"""Stripe-style Idempotency-Key handling for POST requests.

A record per (tenant, key) is inserted first, in its own short transaction: the unique
constraint makes exactly one of any number of concurrent requests its owner. The owner
does the work and stores the exact response bytes in the same transaction as the work;
everyone else gets those bytes back (replay), a 409 while the owner is still working,
or a 422 if they sent a different body under the same key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import counters
from core.exceptions import IdempotencyKeyInUse, IdempotencyKeyMismatch
from webhooks.models import IdempotencyRecord, Tenant

# A request still "processing" after this long died mid-way (its process was killed):
# the key may then be processed again rather than answer 409 until it expires. It must
# exceed the longest request: gunicorn's worker timeout is 30 s (its default, the
# Procfile's), and a gthread worker can let one thread run past it, so five minutes
# leaves a wide margin. Should a request still outlive it, the owner check below
# (`claimed_at`) rolls that request back instead of letting it create a second event.
STALE_PROCESSING = timedelta(minutes=5)


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: bytes
    replayed: bool


def request_fingerprint(payload: Any) -> str:
    """Hash of the request's meaning: key order and whitespace do not make it different."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotent_call(
    *, tenant: Tenant, key: str, fingerprint: str, produce: Callable[[], tuple[int, bytes]]
) -> StoredResponse:
    record = _claim(tenant=tenant, key=key, fingerprint=fingerprint)
    if record.status == IdempotencyRecord.Status.COMPLETED:
        counters.increment("idempotency_replays")
        return StoredResponse(
            record.response_status or 0, bytes(record.response_body or b""), replayed=True
        )
    claimed_at = record.created_at  # our ownership token: a take-over changes it
    try:
        with transaction.atomic():
            status, body = produce()
            still_ours = IdempotencyRecord.objects.filter(
                pk=record.pk, status=IdempotencyRecord.Status.PROCESSING, created_at=claimed_at
            ).update(
                status=IdempotencyRecord.Status.COMPLETED,
                response_status=status,
                response_body=body,
            )
            if not still_ours:
                # Taken over as stale while we worked: roll our work back, so the key
                # yields one event, the new owner's.
                raise _LostOwnership
    except _LostOwnership:
        counters.increment("idempotency_conflicts")
        raise IdempotencyKeyInUse(
            "A request with this Idempotency-Key is still being processed; retry shortly."
        ) from None
    except BaseException:
        # Nothing was done: free the key so the client's retry is processed.
        IdempotencyRecord.objects.filter(
            pk=record.pk, status=IdempotencyRecord.Status.PROCESSING, created_at=claimed_at
        ).delete()
        raise
    return StoredResponse(status, body, replayed=False)


class _LostOwnership(Exception):
    pass


def _claim(*, tenant: Tenant, key: str, fingerprint: str) -> IdempotencyRecord:
    """Our new `processing` record, or the completed record to replay."""
    for _ in range(3):  # a record may expire or be released between our two queries
        now = timezone.now()
        try:
            with transaction.atomic():
                return IdempotencyRecord.objects.create(
                    tenant=tenant,
                    key=key,
                    request_hash=fingerprint,
                    created_at=now,
                    expires_at=now + timedelta(seconds=settings.HOMING_IDEMPOTENCY_TTL),
                )
        except IntegrityError:
            pass
        existing = IdempotencyRecord.objects.filter(tenant=tenant, key=key).first()
        if existing is None:
            continue
        if existing.expires_at <= now:
            IdempotencyRecord.objects.filter(pk=existing.pk, expires_at__lte=now).delete()
            continue
        if existing.request_hash != fingerprint:
            counters.increment("idempotency_conflicts")
            raise IdempotencyKeyMismatch(
                "This Idempotency-Key was already used with a different request body."
            )
        if existing.status == IdempotencyRecord.Status.COMPLETED:
            return existing
        if existing.created_at < now - STALE_PROCESSING and _take_over(existing, now):
            return existing
        counters.increment("idempotency_conflicts")
        raise IdempotencyKeyInUse(
            "A request with this Idempotency-Key is still being processed; retry shortly."
        )
    raise IdempotencyKeyInUse("This Idempotency-Key is changing hands; retry shortly.")


def _take_over(record: IdempotencyRecord, now: Any) -> bool:
    taken = IdempotencyRecord.objects.filter(
        pk=record.pk, status=IdempotencyRecord.Status.PROCESSING, created_at=record.created_at
    ).update(created_at=now)
    if taken:
        record.created_at = now  # the new owner's token
    return taken == 1


def idempotency_records_purge() -> int:
    """Delete records past their TTL; returns how many."""
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted
