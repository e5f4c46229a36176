"""Due deliveries written straight to the database, as if their wake-up messages were
lost: only the workers' own search for due work can find them."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from deliveries.intake.sequences import sequences_take
from deliveries.models import Delivery
from webhooks.models import Endpoint, Event, Tenant


def due_backlog(
    tenant: Tenant, endpoint: Endpoint, count: int, event_type: str = "a.x"
) -> list[Event]:
    """`count` events of `tenant`, each with one delivery to `endpoint`, due now."""
    now = timezone.now()
    events = Event.objects.bulk_create(
        Event(tenant=tenant, type=event_type, data={"n": n}) for n in range(count)
    )
    Delivery.objects.bulk_create(
        Delivery(
            tenant=tenant,
            event=event,
            endpoint=endpoint,
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
            sequence=sequence,
        )
        for event, sequence in zip(events, sequences_take([endpoint.pk] * len(events)), strict=True)
    )
    return events


def pending_backlog(
    *, endpoint: Endpoint, event: Event, rows: int, due: str = "now() + interval '1 day'"
) -> None:
    """`rows` pending deliveries of one event to `endpoint`, written by one SQL statement
    (50,000 in a fraction of a second), due at the SQL expression `due`."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""{RESERVE_SEQUENCES}
            INSERT INTO {Delivery._meta.db_table} (id, tenant_id, event_id, endpoint_id,
                status, attempt_count, schedule_offset, next_attempt_at, last_error,
                created_at, updated_at, sequence)
            SELECT 'dlv_bulk' || n, %s, %s, %s, 'pending', 0, 0, {due}, '', now(), now(),
                (SELECT last FROM reserved) - %s + n
            FROM generate_series(1, %s) AS n""",
            [endpoint.id, rows, endpoint.tenant_id, event.id, endpoint.id, rows, rows],
        )
        # Fresh statistics, as autovacuum would take after such a write. Without them a
        # plan this connection cached while the table was tiny (after an autovacuum found
        # it empty) stays in use: the deferred foreign-key check of each dead letter
        # parked from the backlog scans the whole table, and 50,000 took over 5 minutes.
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")


# `reserved(last)`: `rows` sequence numbers of `endpoint_id`, as ingestion takes them.
RESERVE_SEQUENCES = """
    WITH reserved AS (
        INSERT INTO deliveries_sequencecounter (endpoint_id, last, purged_through)
        VALUES (%s, %s, 0) ON CONFLICT (endpoint_id)
        DO UPDATE SET last = deliveries_sequencecounter.last + EXCLUDED.last RETURNING last
    )"""
