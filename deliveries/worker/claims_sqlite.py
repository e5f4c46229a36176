"""The claim's statements for SQLite, the embedded single-machine set-up: the twin of
claim_sql.py, with the same rules where SQLite allows them.

SQLite serialises writers, so there are no row locks to skip: each UPDATE repeats the
`pending` and due checks instead. It has no statement clock either: the claiming
process's clock is given (one machine: every process shares it). One statement per
endpoint share; the embedded set-up has few endpoints.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from deliveries.lifecycle.in_hand import EventInHand
from webhooks.models import Event

DUE_ENDPOINTS = """
SELECT DISTINCT e.id, e.tenant_id, e.rate_limit
FROM deliveries_delivery d JOIN webhooks_endpoint e ON e.id = d.endpoint_id
WHERE d.status = 'pending' AND d.next_attempt_at <= %(now)s
AND e.circuit_state = 'closed' AND e.is_active AND e.id > %(after)s
ORDER BY e.id LIMIT %(limit)s
"""

CLAIM = """
UPDATE deliveries_delivery SET status = 'delivering', lease_expires_at = %(lease_until)s,
    attempt_count = attempt_count + 1, updated_at = %(now)s
WHERE id IN (
    SELECT id FROM deliveries_delivery
    WHERE endpoint_id = %(endpoint_id)s AND status = 'pending' AND next_attempt_at <= %(now)s
    AND endpoint_id IN (SELECT id FROM webhooks_endpoint WHERE is_active)
    AND (%(any_attempt)s OR (attempt_count = schedule_offset) = %(first_attempts)s)
    ORDER BY next_attempt_at LIMIT %(share)s
) AND status = 'pending' AND next_attempt_at <= %(now)s
RETURNING id, tenant_id, event_id, endpoint_id, attempt_count, schedule_offset, sequence,
    ordering_key, head_since
"""

ENDPOINTS = "SELECT * FROM webhooks_endpoint WHERE id IN (SELECT value FROM json_each(%s))"


def due_endpoints(*, after: str, limit: int) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(DUE_ENDPOINTS, {"now": timezone.now(), "after": after, "limit": limit})
        return cursor.fetchall()


def claim(shares: dict[str, int], attempts: dict[str, bool], lease_seconds: float) -> list:
    now = timezone.now()
    lease_until = now + timedelta(seconds=lease_seconds)
    rows = []
    with transaction.atomic(), connection.cursor() as cursor:
        for endpoint_id, share in shares.items():
            cursor.execute(
                CLAIM,
                {
                    "now": now,
                    "lease_until": lease_until,
                    "endpoint_id": endpoint_id,
                    "share": share,
                    **attempts,
                },
            )
            rows += cursor.fetchall()
    return _with_events(rows)


def _with_events(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Each claimed row with its event in hand at the end, as the PostgreSQL claim
    returns them (SQLite's RETURNING cannot join)."""
    events = {
        event_id: EventInHand(event_id, event_type, data, created_at, trace_context)
        for event_id, event_type, data, created_at, trace_context in Event.objects.filter(
            pk__in={row[2] for row in rows}
        ).values_list("id", "type", "data", "created_at", "trace_context")
    }
    return [(*row, events[row[2]]) for row in rows]
