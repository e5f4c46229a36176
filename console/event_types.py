"""The event types a tenant has sent: the choices of the portal's endpoint forms and of
the console's and the portal's filter editors."""

from __future__ import annotations

from django.db import connection

EVENT_TYPES_SHOWN = 200

# The distinct types of a tenant's events by skipping through index
# event_tenant_type_keyset (tenant, type, ...): one index probe per type, however many
# events each type has. A plain DISTINCT would read every event of the tenant.
EVENT_TYPES_SQL = """
WITH RECURSIVE types(type) AS (
    SELECT MIN(type) FROM webhooks_event WHERE tenant_id = %(tenant)s
    UNION ALL
    SELECT (SELECT MIN(type) FROM webhooks_event WHERE tenant_id = %(tenant)s AND type > types.type)
    FROM types WHERE types.type IS NOT NULL
)
SELECT type FROM types WHERE type IS NOT NULL LIMIT %(limit)s
"""


def event_types_sent(*, tenant_id: str) -> list[str]:
    """The event types a tenant has sent (at most EVENT_TYPES_SHOWN), in name order, without
    Homing's own test and operational events."""
    with connection.cursor() as cursor:
        cursor.execute(EVENT_TYPES_SQL, {"tenant": tenant_id, "limit": EVENT_TYPES_SHOWN})
        return [row[0] for row in cursor.fetchall() if not row[0].startswith("homing.")]
