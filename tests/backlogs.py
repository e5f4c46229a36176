"""Due deliveries written straight to the database, as if their wake-up messages were
lost: only the workers' own search for due work can find them."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from deliveries.models import Delivery
from deliveries.services.sequences import sequences_take
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
            f"""INSERT INTO {Delivery._meta.db_table} (id, tenant_id, event_id, endpoint_id,
                status, attempt_count, schedule_offset, next_attempt_at, last_error,
                created_at, updated_at)
            SELECT 'dlv_bulk' || n, %s, %s, %s, 'pending', 0, 0, {due}, '', now(), now()
            FROM generate_series(1, %s) AS n""",
            [endpoint.tenant_id, event.id, endpoint.id, rows],
        )
