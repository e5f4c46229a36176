"""Rows in every state the operator commands care about, made directly."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from deliveries.intake.sequences import sequences_take
from deliveries.models import Attempt, Delivery
from dlq.models import DeadLetter
from webhooks.models import Endpoint, Event, Tenant
from webhooks.services.endpoints import endpoint_create

URL = "http://127.0.0.1:9/hook"


def endpoint(tenant: Tenant, **fields) -> Endpoint:
    return endpoint_create(tenant=tenant, url=URL, **fields)


def delivery(
    ep: Endpoint,
    status: str = "succeeded",
    *,
    age_days: float = 0,
    attempts: int = 1,
    event_type: str = "order.paid",
    dead_letter: str | None = None,
) -> Delivery:
    """A delivery in `status`, its event `age_days` old; dead_letter: None, "waiting",
    or "replayed"."""
    now = timezone.now()
    event = Event.objects.create(tenant=ep.tenant, type=event_type, data={"n": 1})
    made = Delivery.objects.create(
        tenant=ep.tenant,
        event=event,
        endpoint=ep,
        status=status,
        attempt_count=attempts,
        next_attempt_at=now if status == "pending" else None,
        lease_expires_at=now + timedelta(minutes=1) if status == "delivering" else None,
        last_error="HTTP 503" if status in ("pending", "dead") and attempts else "",
        sequence=sequences_take([ep.pk])[0],
    )
    for number in range(1, attempts + 1):
        Attempt.objects.create(delivery=made, number=number, started_at=now, status_code=503)
    if dead_letter:
        DeadLetter.objects.create(
            tenant=ep.tenant,
            delivery=made,
            event=event,
            endpoint=ep,
            event_type=event_type,
            reason="HTTP 503 after 9 attempts",
            dead_at=now,
            replayed_at=now if dead_letter == "replayed" else None,
        )
    if age_days:
        Event.objects.filter(pk=event.pk).update(created_at=now - timedelta(days=age_days))
    return made
