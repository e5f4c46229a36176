"""A retry asked for by a person or a program is admitted like an event.

`POST /deliveries/{id}/retry`, the console's and the portal's retry buttons: each puts a
delivery back to work, so it counts against the tenant's backpressure (CONTRACT section
2): 429 while the tenant's backlog is full. The retry itself is lifecycle's
(interventions.delivery_retry_now); the scheduler's own retries are not admitted here.
"""

from __future__ import annotations

from deliveries.intake.backpressure import work_admit, work_admitted
from deliveries.lifecycle.interventions import delivery_retry_now
from deliveries.models import Delivery
from webhooks.services.endpoints import EndpointInactive


def delivery_retry(*, delivery: Delivery) -> Delivery:
    """One more attempt now (lifecycle's `delivery_retry_now`), admitted first."""
    if not delivery.endpoint.is_active:  # refused before it takes a place in the rate
        raise EndpointInactive("The endpoint is deactivated; activate it first.")
    work_admit(tenant_id=delivery.tenant_id)
    retried = delivery_retry_now(delivery=delivery)
    work_admitted(tenant_id=delivery.tenant_id, deliveries=1)
    return retried
