"""Which dead letters a filter names: shared by the API, the console and replay jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from django.db.models import Q, QuerySet

from dlq.models import DeadLetter


class Criteria(TypedDict, total=False):
    """A filter over the queue, JSON-serialisable (a replay job stores it)."""

    tenant: str
    ids: list[str]
    endpoint: str
    event_type: str
    reason: str  # substring, case-insensitive
    dead_after: str  # ISO 8601
    dead_before: str  # ISO 8601
    replayed: bool


def dead_letters_in_queue() -> QuerySet[DeadLetter]:
    """Every dead letter not discarded (replayed ones stay listed, marked replayed)."""
    return DeadLetter.objects.filter(discarded_at__isnull=True)


def dead_letters_matching(*, criteria: Criteria | dict[str, Any]) -> QuerySet[DeadLetter]:
    letters = dead_letters_in_queue()
    filters = Q()
    if "tenant" in criteria:
        filters &= Q(tenant_id=criteria["tenant"])
    if "ids" in criteria:
        filters &= Q(pk__in=criteria["ids"])
    if "endpoint" in criteria:
        filters &= Q(endpoint_id=criteria["endpoint"])
    if "event_type" in criteria:
        filters &= Q(event_type=criteria["event_type"])
    if "reason" in criteria:
        filters &= Q(reason__icontains=criteria["reason"])
    if "dead_after" in criteria:
        filters &= Q(dead_at__gte=datetime.fromisoformat(criteria["dead_after"]))
    if "dead_before" in criteria:
        filters &= Q(dead_at__lt=datetime.fromisoformat(criteria["dead_before"]))
    if "replayed" in criteria:
        filters &= Q(replayed_at__isnull=not criteria["replayed"])
    return letters.filter(filters)


def dead_letters_waiting(*, criteria: Criteria | dict[str, Any]) -> QuerySet[DeadLetter]:
    """The ones a replay would take: matching, not replayed yet."""
    return dead_letters_matching(criteria=criteria).filter(replayed_at__isnull=True)
