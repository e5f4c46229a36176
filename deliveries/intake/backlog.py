"""How many unfinished deliveries a tenant has, counted only as far as a question needs.

Backpressure (deliveries/intake/backpressure.py) asks "has this tenant reached N?": the
count stops at N rows, walking the index `delivery_tenant_status` (tenant, status, ...)
for the unfinished statuses, so it costs what the tenant's backlog costs up to N and
never touches other tenants' rows.
"""

from __future__ import annotations

from deliveries.models import Delivery
from deliveries.statuses import UNFINISHED


def tenant_unfinished_count(*, tenant_id: str, most: int) -> int:
    """The tenant's pending and delivering deliveries, or `most` if there are at least that
    many (`SELECT count(*) FROM (SELECT 1 ... LIMIT most)`)."""
    return Delivery.objects.filter(tenant_id=tenant_id, status__in=UNFINISHED)[:most].count()
