from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from core.sql import insert_statement
from deliveries.models import Delivery
from deliveries.queue import publish_deliveries_on_commit
from webhooks.models import Endpoint, Event


def deliveries_create_for_event(*, event: Event, endpoints: Iterable[Endpoint]) -> list[Delivery]:
    """One pending delivery per endpoint, due now, published when the transaction commits."""
    return deliveries_create_for_events(fan_out=[(event, list(endpoints))])[0]


def deliveries_create_for_events(
    *, fan_out: Sequence[tuple[Event, Sequence[Endpoint]]]
) -> list[list[Delivery]]:
    """Each event's deliveries (in order) from one multi-row INSERT and one wake-up."""
    per_event = deliveries_build(fan_out=fan_out, now=timezone.now())
    every = [delivery for deliveries in per_event for delivery in deliveries]
    Delivery.objects.bulk_create(every)
    publish_deliveries_on_commit([delivery.id for delivery in every])
    return per_event


def deliveries_build(
    *, fan_out: Sequence[tuple[Event, Sequence[Endpoint]]], now: datetime
) -> list[list[Delivery]]:
    """Each event's pending deliveries, due now, not saved yet."""
    return [
        [
            Delivery(
                tenant_id=event.tenant_id,
                event=event,
                endpoint_id=endpoint.pk,
                next_attempt_at=now,
                created_at=now,
                updated_at=now,
            )
            for endpoint in endpoints
        ]
        for event, endpoints in fan_out
    ]


def deliveries_insert_statement(deliveries: Sequence[Delivery]) -> tuple[str, list[Any]]:
    """The INSERT of these deliveries, for ingestion to run in one statement with its events
    (it publishes them itself once they are committed)."""
    return insert_statement(Delivery, deliveries)
