from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from deliveries.models import Delivery
from deliveries.queue import publish_deliveries_on_commit
from webhooks.models import Endpoint, Event


def deliveries_create_for_event(*, event: Event, endpoints: Iterable[Endpoint]) -> list[Delivery]:
    """One pending delivery per endpoint, due now, published when the transaction commits."""
    now = timezone.now()
    deliveries = [
        Delivery(
            tenant_id=event.tenant_id,
            event=event,
            endpoint=endpoint,
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
        )
        for endpoint in endpoints
    ]
    Delivery.objects.bulk_create(deliveries)
    publish_deliveries_on_commit([delivery.id for delivery in deliveries])
    return deliveries
