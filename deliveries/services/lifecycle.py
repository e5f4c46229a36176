"""State changes of deliveries that are not an HTTP attempt."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from core.exceptions import HomingError
from core.redis import once_claim, once_release
from deliveries.models import Delivery
from deliveries.policy import current_policy
from deliveries.queue import publish_deliveries_on_commit, publish_retry_when_free
from dlq.services.dead_letters import dead_letters_create
from webhooks.models import Endpoint


@transaction.atomic
def deliveries_kill_for_endpoint(*, endpoint_id: str, reason: str) -> int:
    """Move an endpoint's pending deliveries to the dead-letter queue; returns how many.

    Deliveries a worker holds right now finish their attempt; the worker then finds the
    endpoint inactive and parks them too.
    """
    now = timezone.now()
    doomed = list(
        Delivery.objects.select_for_update()
        .select_related("event")
        .filter(endpoint_id=endpoint_id, status=Delivery.Status.PENDING)
    )
    if not doomed:
        return 0
    Delivery.objects.filter(pk__in=[d.pk for d in doomed], status=Delivery.Status.PENDING).update(
        status=Delivery.Status.DEAD,
        next_attempt_at=None,
        last_error=reason,
        updated_at=now,
    )
    dead_letters_create(deliveries=doomed, reasons=[reason] * len(doomed), dead_at=now)
    return len(doomed)


def endpoint_deactivate(*, endpoint_id: str) -> None:
    """Stop sending to an endpoint (it answered 410 Gone) and park what waits for it."""
    with transaction.atomic():
        updated = Endpoint.objects.filter(pk=endpoint_id, is_active=True).update(
            is_active=False, updated_at=timezone.now()
        )
        if updated:
            deliveries_kill_for_endpoint(endpoint_id=endpoint_id, reason="endpoint deactivated")


# A manual retry waits for an attempt in flight this many seconds at most: longer than
# any lease, after which the scheduler has taken a dead worker's delivery back.
RETRY_WAIT_TRIES = 120


class EndpointInactive(HomingError):
    status_code = 409


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
    now = timezone.now()
    fields: dict[str, object] = {
        "status": Delivery.Status.PENDING,
        "next_attempt_at": now,
        "updated_at": now,
    }
    if delivery.status != Delivery.Status.PENDING:
        fields["schedule_offset"] = delivery.attempt_count - len(current_policy().schedule)
    with transaction.atomic():
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
        delivery_retry_now(delivery=delivery)


def _chain_key(delivery_id: str) -> str:
    return f"homing:retry-chain:{delivery_id}"
