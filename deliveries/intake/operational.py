"""Operational events (`homing.*`) in: lifecycle announces them, intake ingests them.

Lifecycle may not import intake (LAYOUT.md), so recording sends
`deliveries.signals.operational_events` after its batch commits and this receiver,
connected in `DeliveriesConfig.ready()`, ingests them through the normal pipeline, never
to the endpoint they are about.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from deliveries.intake.ingest import events_ingest
from deliveries.lifecycle.health import Operational
from webhooks.models import Tenant
from webhooks.services.event_input import EventInput

logger = logging.getLogger(__name__)


def operational_events_received(*, events: Sequence[Operational], **_: Any) -> None:
    """Ingest operational events as the tenants' own; a failure is logged, never raised
    (they are news about deliveries already recorded)."""
    groups: dict[tuple[str, str], list[Operational]] = {}
    for event in events:
        groups.setdefault((event.tenant_id, event.about_endpoint_id), []).append(event)
    for (tenant_id, about), group in groups.items():
        try:
            events_ingest(
                tenant=Tenant(pk=tenant_id),
                inputs=[EventInput(type=e.type, data=e.data) for e in group],
                exclude_endpoint_id=about,
            )
        except Exception:
            logger.exception("could not emit %d operational events", len(group))
