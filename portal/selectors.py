"""Reads behind the consumer portal's own pages. The pages it shares with the console (an
endpoint and its deliveries, a delivery, dead letters) use console.selectors with the
session's Scope: one selector per question."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Count
from django.utils import timezone

from deliveries.models import Delivery
from dlq.selectors import dead_letters_waiting
from webhooks.models import Endpoint, EventType
from webhooks.scope import Scope

CATALOG_SHOWN = 500  # entries on the catalog page (a catalog is tens of types, not more)


@dataclass
class EndpointHealth:
    endpoint: Endpoint
    success_rate: float | None  # of its deliveries of the last 24 h that finished; None: none
    finished_day: int
    waiting_dead_letters: int


def endpoints_with_health(*, scope: Scope) -> list[EndpointHealth]:
    """The scope's endpoints, newest first, each with its last day's success rate: of the
    deliveries created in the last 24 h that finished, the share that succeeded."""
    endpoints = list(scope.narrow(Endpoint.objects.all()).order_by("-created_at", "-id"))
    ids = [endpoint.pk for endpoint in endpoints]
    finished: dict[str, dict[str, int]] = {pk: {} for pk in ids}
    # Index delivery_tenant_created: the tenant's last day, grouped by endpoint and status.
    for row in (
        Delivery.objects.filter(
            tenant_id=scope.tenant_id,
            endpoint_id__in=ids,
            created_at__gte=timezone.now() - timedelta(hours=24),
            status__in=[Delivery.Status.SUCCEEDED, Delivery.Status.DEAD],
        )
        .values("endpoint_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    ):
        finished[row["endpoint_id"]][row["status"]] = row["n"]
    waiting = dict(
        # Index deadletter_waiting_endpoint (partial): each endpoint's waiting letters.
        dead_letters_waiting(criteria={"tenant": scope.tenant_id})
        .filter(endpoint_id__in=ids)
        .values_list("endpoint_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    rows = []
    for endpoint in endpoints:
        counts = finished[endpoint.pk]
        total = sum(counts.values())
        rows.append(
            EndpointHealth(
                endpoint=endpoint,
                success_rate=counts.get(Delivery.Status.SUCCEEDED, 0) / total if total else None,
                finished_day=total,
                waiting_dead_letters=waiting.get(endpoint.pk, 0),
            )
        )
    return rows


def event_type_catalog(*, tenant_id: str) -> list[tuple[str, list[CatalogEntry]]]:
    """The tenant's catalog grouped by prefix (what comes before the first dot), in name
    order, each entry with its schema and first example pretty-printed for the page."""
    groups: dict[str, list[CatalogEntry]] = {}
    for entry in EventType.objects.filter(tenant_id=tenant_id).order_by("name")[:CATALOG_SHOWN]:
        groups.setdefault(entry.name.split(".", 1)[0], []).append(
            CatalogEntry(
                entry=entry,
                schema=_pretty(entry.schema) if entry.schema is not None else "",
                example=_pretty(entry.examples[0]) if entry.examples else "",
            )
        )
    return list(groups.items())


@dataclass(frozen=True)
class CatalogEntry:
    entry: EventType
    schema: str
    example: str


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
