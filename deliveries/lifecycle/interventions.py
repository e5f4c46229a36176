"""State changes of deliveries that are not an HTTP attempt."""

from __future__ import annotations

import time

from django.db import transaction
from django.utils import timezone

from core.clock import database_now
from core.redis import once_claim, once_release
from deliveries.lifecycle.health import (
    GONE_REASON,
    endpoint_disabled_event,
    operational_events_emit,
)
from deliveries.lifecycle.in_hand import EventInHand, InHand
from deliveries.lifecycle.ordering import delivery_leave_line
from deliveries.lifecycle.policy import current_policy
from deliveries.models import Delivery
from deliveries.signals import deliveries_died_send
from deliveries.wakeups import publish_deliveries_on_commit, publish_retry_when_free
from webhooks.models import Endpoint
from webhooks.services.endpoints import EndpointInactive

DEACTIVATED_REASON = "endpoint deactivated"
# Deliveries parked per transaction: a 50,000-deep backlog is parked in short
# transactions holding a bounded number of rows, never all of it at once.
PARK_BATCH = 1000
# Parked: due ones and those waiting in their ordering key's line alike.
WAITING = [Delivery.Status.PENDING, Delivery.Status.HELD]


def deliveries_kill_for_endpoint(
    *, endpoint_id: str, reason: str, deadline: float | None = None
) -> int:
    """Move an inactive endpoint's pending deliveries to the dead-letter queue; returns
    how many. Stops early when the endpoint is active again, or at `deadline`
    (time.monotonic()).

    In batches of PARK_BATCH, each its own transaction, loading ids and event types
    only (never event data), so the memory and lock time are bounded by the batch.
    Deliveries a worker holds right now finish their attempt; one that comes back
    pending is parked by the next run (the scheduler's sweep, endpoint_backlogs.py).
    """
    total = 0
    while deadline is None or time.monotonic() < deadline:
        parked = _park_batch(endpoint_id, reason)
        total += parked
        if parked < PARK_BATCH:
            break
    return total


def _park_batch(endpoint_id: str, reason: str) -> int:
    now = database_now()
    with transaction.atomic():
        # Held for the batch (well under a second): a re-activation waits for it, and
        # the next batch sees the endpoint active and parks nothing more.
        inactive = Endpoint.all_objects.select_for_update(no_key=True).filter(
            pk=endpoint_id, is_active=False
        )
        if not inactive.values_list("pk", flat=True)[:1]:
            return 0
        waiting = Delivery.objects.select_for_update(skip_locked=True).filter(
            endpoint_id=endpoint_id
        )
        # Those held in an ordering key's line first (index delivery_ordering_line): a
        # job killed midway then leaves pending ones, which the scheduler's sweep finds,
        # never a held one whose line's first was parked already.
        ids = list(
            waiting.filter(status=Delivery.Status.HELD, ordering_key__isnull=False).values_list(
                "id", flat=True
            )[:PARK_BATCH]
        )
        ids += waiting.filter(status=Delivery.Status.PENDING).values_list("id", flat=True)[
            : PARK_BATCH - len(ids)
        ]
        if not ids:
            return 0
        Delivery.objects.filter(pk__in=ids, status__in=WAITING).update(
            status=Delivery.Status.DEAD,
            next_attempt_at=None,
            blocked_by=None,
            last_error=reason,
            updated_at=now,
        )
        rows = Delivery.objects.filter(pk__in=ids).values_list(
            "id", "tenant_id", "event_id", "event__type"
        )
        parked = [
            InHand(
                id=d_id,
                tenant_id=tenant,
                endpoint_id=endpoint_id,
                event=EventInHand(event_id, t, None, now),
            )
            for d_id, tenant, event_id, t in rows
        ]
        deliveries_died_send(
            deliveries=parked,
            reasons=[reason] * len(parked),
            dead_at=now,
        )
    return len(ids)


def endpoint_deactivate(*, endpoint_id: str, reason: str = GONE_REASON) -> bool:
    """Stop sending to an endpoint (it answered 410 Gone, or has failed for
    HOMING_DEACTIVATE_AFTER); True if this call did, which emits
    `homing.endpoint.disabled`. The caller then parks what waits for it
    (`deliveries_kill_for_endpoint`), off the recorder's thread."""
    done = bool(
        Endpoint.objects.filter(pk=endpoint_id, is_active=True).update(
            is_active=False, disabled_reason=reason[:500], updated_at=timezone.now()
        )
    )
    if done:
        endpoint = Endpoint.objects.filter(pk=endpoint_id).first()
        if endpoint is not None:
            operational_events_emit(events=[endpoint_disabled_event(endpoint=endpoint)])
    return done


# A manual retry waits for an attempt in flight this many seconds at most: longer than
# any lease, after which the scheduler has taken a dead worker's delivery back.
RETRY_WAIT_TRIES = 120


def delivery_retry_now(*, delivery: Delivery) -> Delivery:
    """One more attempt now, whatever the status (POST /deliveries/{id}/retry).

    A pending delivery keeps its schedule and is simply due now. A succeeded or dead one
    gets exactly one extra attempt: its schedule is treated as spent, so a failure parks
    it again instead of starting the whole retry schedule over (that is what a
    dead-letter replay is for). One in flight gets its extra attempt once the current
    attempt is recorded, so two attempts never overlap.
    """
    if not delivery.endpoint.is_active:
        raise EndpointInactive("The endpoint is deactivated; activate it first.")
    return _retry(delivery=delivery)


def _retry(*, delivery: Delivery) -> Delivery:
    now = database_now()
    fields: dict[str, object] = {
        "status": Delivery.Status.PENDING,
        "next_attempt_at": now,
        "updated_at": now,
    }
    if delivery.status in (Delivery.Status.SUCCEEDED, Delivery.Status.DEAD):
        fields["schedule_offset"] = delivery.attempt_count - len(current_policy().schedule)
    with transaction.atomic():
        # Sent at once, it blocks its ordering key no more (a first of line stays first).
        fields.update(delivery_leave_line(delivery=delivery))
        updated = (
            Delivery.objects.filter(
                pk=delivery.pk, status=delivery.status, attempt_count=delivery.attempt_count
            )
            .exclude(status=Delivery.Status.DELIVERING)
            .update(**fields)
        )
        if updated:
            publish_deliveries_on_commit([delivery.pk])
        elif once_claim(_chain_key(delivery.pk), ttl_seconds=RETRY_WAIT_TRIES + 60):
            # In flight (or just claimed): come back when its attempt is recorded. One
            # waiting chain per delivery: more clicks meanwhile add no messages.
            transaction.on_commit(
                lambda: publish_retry_when_free(delivery.pk, tries_left=RETRY_WAIT_TRIES)
            )
    delivery.refresh_from_db()
    return delivery


def delivery_retry_when_free(*, delivery_id: str, tries_left: int) -> None:
    """The retry asked for while an attempt was in flight, once that attempt is over."""
    delivery = Delivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None or not delivery.endpoint.is_active:
        once_release(_chain_key(delivery_id))
        return
    if delivery.status == Delivery.Status.DELIVERING and tries_left > 0:
        publish_retry_when_free(delivery_id, tries_left=tries_left - 1)
        return
    once_release(_chain_key(delivery_id))  # the chain ends here
    if delivery.status != Delivery.Status.DELIVERING:
        _retry(delivery=delivery)  # admitted when it was asked for


def _chain_key(delivery_id: str) -> str:
    return f"homing:retry-chain:{delivery_id}"
