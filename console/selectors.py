"""Reads behind the console's pages. Each is shaped for one page and bounded: keyset
pages, per-minute aggregates and planner estimates instead of scans of big tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet, Sum
from django.utils import timezone

from console.charts import Chart, attempts_chart, endpoint_stats_chart
from console.paging import cursor_decode, cursor_encode, newest_first_page
from core.crypto import UNREADABLE, opened
from core.exceptions import StoredValueUnreadable
from deliveries.models import Attempt, AttemptMinute, Delivery, SequenceCounter
from dlq.models import DeadLetter, ReplayJob
from dlq.selectors import (
    STATS_PERIODS,
    Criteria,
    dead_letters_matching,
    dead_letters_waiting,
    endpoint_stats,
    queue_gauges_bounded,
)
from dlq.services.kept_history import kept_delivery, kept_event
from webhooks.models import Endpoint, Event, Tenant
from webhooks.scope import Scope
from webhooks.secrets import ED25519
from webhooks.services.endpoint_auth import auth_shown
from webhooks.services.endpoint_certificates import certificate_info
from webhooks.services.endpoint_filters import endpoint_filter_text
from webhooks.services.endpoint_readable import endpoint_unreadable
from webhooks.services.endpoints import endpoint_public_key

PAGE_SIZE = 50
CHART_HOURS = 6
FAILING_WINDOW = timedelta(hours=24)


# --- dashboard ------------------------------------------------------------------------


@dataclass
class Dashboard:
    deliveries_by_status: dict[str, int]
    statuses_estimated: bool
    success_rate_hour: float | None  # None when no attempt was made
    success_rate_day: float | None
    attempts_hour: int
    attempts_day: int
    chart: Chart
    dead_letters_waiting: int
    oldest_dead_letter: datetime | None
    failing_endpoints: list[dict[str, Any]]
    open_circuits: int  # open or half open (probing)


def _success_rate(since: datetime) -> tuple[float | None, int]:
    rows = (
        AttemptMinute.objects.filter(minute__gte=since).values("outcome").annotate(n=Sum("count"))
    )
    by_outcome = {row["outcome"]: row["n"] for row in rows}
    total = sum(by_outcome.values())
    return (by_outcome.get("success", 0) / total if total else None), total


def _failing_endpoints(now: datetime, limit: int = 5) -> list[dict[str, Any]]:
    rows = list(
        DeadLetter.objects.filter(discarded_at__isnull=True, dead_at__gte=now - FAILING_WINDOW)
        .values("endpoint_id")
        .annotate(n=Count("id"), last=Max("dead_at"))
        .order_by("-n")[:limit]
    )
    endpoints = Endpoint.objects.select_related("tenant").in_bulk([r["endpoint_id"] for r in rows])
    for row in rows:
        row["endpoint"] = endpoints.get(row["endpoint_id"])
        # Index deadletter_endpoint_dead: this endpoint's newest dead letter.
        row["last_reason"] = (
            DeadLetter.objects.filter(endpoint_id=row["endpoint_id"], discarded_at__isnull=True)
            .order_by("-dead_at")
            .values_list("reason", flat=True)
            .first()
        )
    return rows


def dashboard_read() -> Dashboard:
    now = timezone.now()
    # The queue's figures as /metrics reads them: bounded in cost however big the tables.
    gauges = queue_gauges_bounded()
    rate_hour, attempts_hour = _success_rate(now - timedelta(hours=1))
    rate_day, attempts_day = _success_rate(now - timedelta(days=1))
    start = (
        now.replace(second=0, microsecond=0) - timedelta(hours=CHART_HOURS) + timedelta(minutes=1)
    )
    counts = {
        (row.minute, row.outcome): row.count
        for row in AttemptMinute.objects.filter(minute__gte=start)
    }
    return Dashboard(
        deliveries_by_status=gauges.deliveries_by_status,
        statuses_estimated=gauges.statuses_estimated,
        success_rate_hour=rate_hour,
        success_rate_day=rate_day,
        attempts_hour=attempts_hour,
        attempts_day=attempts_day,
        chart=attempts_chart(counts=counts, start=start, minutes=CHART_HOURS * 60),
        dead_letters_waiting=gauges.dead_letters_waiting,
        oldest_dead_letter=gauges.oldest_dead_letter_at,
        failing_endpoints=_failing_endpoints(now),
        open_circuits=gauges.open_circuits,
    )


# --- dead letters -----------------------------------------------------------------------


@dataclass
class DeadLetterPage:
    rows: list[DeadLetter]
    next_cursor: str | None
    waiting: int  # matching and not replayed: what "Replay all" would take (may be capped)

    @property
    def waiting_capped(self) -> bool:
        return self.waiting > REASON_COUNT_CAP

    @property
    def cap(self) -> str:
        return f"{REASON_COUNT_CAP:,}"


def dead_letter_page(
    *, criteria: Criteria | dict[str, Any], cursor: str = "", size: int = PAGE_SIZE
) -> DeadLetterPage:
    """Newest first, keyset on (dead_at, id): deep pages cost what the first one does."""
    letters = dead_letters_matching(criteria=criteria).select_related("tenant", "endpoint")
    rows, next_cursor = newest_first_page(letters, moment="dead_at", cursor=cursor, size=size)
    return DeadLetterPage(
        rows=rows, next_cursor=next_cursor, waiting=dead_letters_waiting_count(criteria=criteria)
    )


# The reason filter is a substring match no index serves: its count stops here.
REASON_COUNT_CAP = 10_000


def dead_letters_waiting_count(*, criteria: Criteria | dict[str, Any]) -> int:
    """How many a "Replay all" would take; with a reason filter at most REASON_COUNT_CAP
    + 1 (shown as "more than 10,000"), as an exact count would read every row."""
    waiting = dead_letters_waiting(criteria=criteria)
    if "reason" in criteria:
        return waiting[: REASON_COUNT_CAP + 1].count()
    return waiting.count()


def replay_job_read(*, job_id: str) -> ReplayJob | None:
    return ReplayJob.objects.filter(pk=job_id).first()


# --- deliveries, endpoints, tenants ---------------------------------------------------------


@dataclass
class DeliveryDetail:
    delivery: Delivery
    payload: str  # pretty-printed JSON; the template escapes it
    attempts: list[Attempt]
    dead_letters: list[DeadLetter]
    # Retention dropped its rows; this is what its waiting dead letter kept (no attempts,
    # no retry: a replay of the letter brings it back).
    dropped: bool = False


def delivery_detail(*, delivery_id: str, scope: Scope | None = None) -> DeliveryDetail | None:
    """One delivery for its page; with a scope (the portal) only one the scope may see."""
    deliveries = Delivery.objects.select_related("event", "endpoint", "tenant")
    if scope is not None:
        deliveries = scope.narrow(deliveries)
    delivery = deliveries.filter(pk=delivery_id).first()
    if delivery is None:
        return _dropped_delivery_detail(delivery_id=delivery_id, scope=scope)
    return DeliveryDetail(
        delivery=delivery,
        payload=_pretty(delivery.event.data),
        attempts=list(delivery.attempts.order_by("number")),
        dead_letters=list(delivery.dead_letters.order_by("-dead_at")[:20]),
    )


def _dropped_delivery_detail(*, delivery_id: str, scope: Scope | None) -> DeliveryDetail | None:
    """A delivery whose rows retention dropped while a dead letter of it waits (the dead
    letter lists link here): the page as the letter kept it. None when no letter waits."""
    letters = DeadLetter.objects.select_related("endpoint", "tenant").filter(
        delivery_id=delivery_id
    )
    if scope is not None:
        letters = scope.narrow(letters)
    kept = list(letters.order_by("-dead_at")[:20])
    waiting = next(
        (x for x in kept if x.kept and x.replayed_at is None and x.discarded_at is None), None
    )
    if waiting is None:
        return None
    delivery = kept_delivery(waiting)
    delivery.event = kept_event(waiting)
    delivery.endpoint, delivery.tenant = waiting.endpoint, waiting.tenant
    return DeliveryDetail(
        delivery=delivery,
        payload=_pretty(waiting.event_data),
        attempts=[],
        dead_letters=kept,
        dropped=True,
    )


def _pretty(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True)


@dataclass
class EndpointDetail:
    endpoint: Endpoint
    deliveries: list[Delivery]
    next_cursor: str | None
    waiting_dead_letters: int
    health: dict[str, Any] | None  # None: no health fields in this version
    last_sequence: int  # the sequence of its latest delivery (0: none yet)
    transport: EndpointTransport
    filter_text: str | None  # endpoint_filter_text: "" no filter, None cannot be read


@dataclass(frozen=True)
class EndpointTransport:
    """How webhooks reach the endpoint, as the pages show it: nothing write-only (no client
    secret, no certificate PEM), as the API shows it."""

    signing: str
    public_key: str | None  # an ed25519 endpoint's whpk_ key, for its receiver
    auth: dict[str, Any] | None  # auth_shown: no client secret
    certificate: dict[str, str] | None  # subject, issuer, expires_at
    # endpoint_unreadable but the filter (its own block says so): what to replace
    unreadable: tuple[str, ...] = ()

    @property
    def unreadable_labels(self) -> list[str]:
        return [UNREADABLE_LABELS[name] for name in self.unreadable]


UNREADABLE_LABELS = {
    "secret": "the signing secret (rotate it)",
    "headers": "the extra headers' values",
    "auth": "the OAuth2 client secret",
    "tls_client_certificate": "the client certificate",
}


def endpoint_transport(*, endpoint: Endpoint) -> EndpointTransport:
    stored = endpoint.tls_client_certificate
    certificate = opened(lambda: certificate_info(stored=stored))
    return EndpointTransport(
        signing=endpoint.signing,
        public_key=_public_key(endpoint),
        auth=auth_shown(endpoint.auth),
        certificate=None if certificate is UNREADABLE else certificate,
        unreadable=tuple(n for n in endpoint_unreadable(endpoint=endpoint) if n != "filter"),
    )


def _public_key(endpoint: Endpoint) -> str | None:
    """An Ed25519 endpoint's `whpk_` key. Only those are decrypted (an HMAC secret is not
    shown), and a key this process cannot decrypt leaves the page up without it."""
    if endpoint.signing != ED25519:
        return None
    try:
        return endpoint_public_key(endpoint=endpoint)
    except StoredValueUnreadable:
        return None


HEALTH_FIELDS = ("circuit_state", "consecutive_failures", "failing_since", "disabled_reason")


def endpoint_detail(
    *,
    endpoint_id: str,
    cursor: str = "",
    size: int = 25,
    scope: Scope | None = None,
    status: str = "",
    event_type: str = "",
) -> EndpointDetail | None:
    """An endpoint and a page of its deliveries (optionally of one status or event type);
    with a scope (the portal) only an endpoint the scope may see."""
    endpoints = Endpoint.objects.select_related("tenant")
    if scope is not None:
        endpoints = scope.narrow(endpoints)
    endpoint = endpoints.filter(pk=endpoint_id).first()
    if endpoint is None:
        return None
    # Newest first, keyset on (created_at, id). The tenant filter is redundant but lets
    # PostgreSQL walk index delivery_tenant_created newest first and stop after a page,
    # instead of sorting every delivery of a busy endpoint.
    deliveries = Delivery.objects.filter(
        tenant_id=endpoint.tenant_id, endpoint=endpoint
    ).select_related("event")
    if status:
        deliveries = deliveries.filter(status=status)
    if event_type:
        deliveries = deliveries.filter(event__type=event_type)
    rows, next_cursor = newest_first_page(deliveries, moment="created_at", cursor=cursor, size=size)
    return EndpointDetail(
        endpoint=endpoint,
        deliveries=rows,
        next_cursor=next_cursor,
        waiting_dead_letters=dead_letters_waiting(criteria={"endpoint": endpoint.pk}).count(),
        health={
            **{name: getattr(endpoint, name) for name in HEALTH_FIELDS},
            "circuit_opens_at": settings.HOMING_CIRCUIT_FAILURES,
        },
        last_sequence=SequenceCounter.objects.filter(endpoint=endpoint)
        .values_list("last", flat=True)
        .first()
        or 0,
        transport=endpoint_transport(endpoint=endpoint),
        filter_text=endpoint_filter_text(endpoint=endpoint),
    )


EVENTS_COUNT_CAP = 10_000


@dataclass
class TenantRow:
    tenant: Tenant
    endpoints: list[Endpoint]
    events_day: int  # at most EVENTS_COUNT_CAP + 1

    @property
    def events_day_capped(self) -> bool:
        return self.events_day > EVENTS_COUNT_CAP


def tenant_page(*, cursor: str = "", size: int = 25) -> tuple[list[TenantRow], str | None]:
    # By name, keyset on (name, id): a staff member looks a customer up by name.
    tenants: QuerySet[Tenant] = Tenant.objects.order_by("name", "id")
    if cursor:
        last_name, last_id = cursor_decode(cursor, size=2)
        tenants = tenants.filter(name__gte=last_name).filter(
            Q(name__gt=last_name) | Q(id__gt=last_id)
        )
    page = list(tenants[: size + 1])
    next_cursor = None
    if len(page) > size:
        next_cursor = cursor_encode(page[size - 1].name, page[size - 1].id)
    page = page[:size]
    endpoints: dict[str, list[Endpoint]] = {t.id: [] for t in page}
    for endpoint in Endpoint.objects.filter(tenant__in=page).order_by("-created_at"):
        endpoints[endpoint.tenant_id].append(endpoint)
    since = timezone.now() - timedelta(days=1)
    rows = [
        TenantRow(
            tenant=tenant,
            endpoints=endpoints[tenant.id],
            # Index event_tenant_created: a range of one tenant's newest events, counted
            # up to a cap (a busy tenant's day would otherwise be a long index scan).
            events_day=Event.objects.filter(tenant=tenant, created_at__gte=since)[
                : EVENTS_COUNT_CAP + 1
            ].count(),
        )
        for tenant in page
    ]
    return rows, next_cursor


def tenant_choices() -> list[tuple[str, str]]:
    return list(Tenant.objects.order_by("name").values_list("id", "name")[:500])


def endpoint_stats_shown(*, endpoint: Endpoint, period: str | None) -> dict[str, Any]:
    """The endpoint page's statistics and chart (console and portal): the API's selector
    (dlq.selectors.endpoint_stats) over `period`, 24h when it is not one of them."""
    chosen = period if period in STATS_PERIODS else "24h"
    stats = endpoint_stats(endpoint=endpoint, period=chosen)
    return {
        "stats": stats,
        "chart": endpoint_stats_chart(period=chosen, buckets=stats.buckets),
        "stats_periods": list(STATS_PERIODS),
    }
