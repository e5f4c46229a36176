"""Demo data for the console and its benchmark: tenants, endpoints, events, deliveries,
attempts, dead letters and the per-minute aggregate.

Generated inside PostgreSQL (INSERT … SELECT over generate_series): no row crosses the
wire, so 100,000 dead letters and 1,000,000 attempts load in well under a minute.
Idempotent by topping up: demo tenants and endpoints have fixed ids, and each run adds
only the dead letters and attempts still missing to reach the numbers asked for.
Seeded deliveries are finished (succeeded or dead), so a running worker sends nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from core import crypto
from deliveries.models import Attempt, AttemptMinute, Delivery, SequenceCounter
from dlq.models import DeadLetter
from webhooks.models import Endpoint, Event, Tenant
from webhooks.secrets import generate_secret

TENANTS = {
    "ten_demo_acme": ("Acme Shop", ["shop.acme.example", "erp.acme.example"]),
    "ten_demo_globex": ("Globex Payments", ["api.globex.example", "ledger.globex.example"]),
    "ten_demo_initech": ("Initech CRM", ["hooks.initech.example"]),
    "ten_demo_umbrella": ("Umbrella Logistics", ["track.umbrella.example", "ops.umbrella.example"]),
    "ten_demo_hooli": ("Hooli Cloud", ["events.hooli.example"]),
    "ten_demo_stark": ("Stark Energy", ["grid.stark.example", "billing.stark.example"]),
}
# Each demo tenant's customer who owns its endpoints (the consumer portal's `owner`).
OWNERS = {
    "ten_demo_acme": "northwind",
    "ten_demo_globex": "contoso",
    "ten_demo_initech": "fabrikam",
    "ten_demo_umbrella": "tailspin",
    "ten_demo_hooli": "wingtip",
    "ten_demo_stark": "adventure-works",
}
EVENT_TYPES = [
    "order.paid",
    "order.refunded",
    "invoice.sent",
    "customer.updated",
    "shipment.delivered",
]
# Attempts per delivery on average: a dead one ~4.5 (30 % refused at once, the rest
# retried 3-9 times), a succeeded one 1.12 (12 % needed a retry).
DEAD_ATTEMPTS, SUCCEEDED_ATTEMPTS = 4.5, 1.12


@dataclass
class SeedReport:
    dead_letters: int
    attempts: int
    events: int
    deliveries: int


def demo_setup() -> dict[str, list[Endpoint]]:
    """The demo tenants and their endpoints (fixed ids), created once."""
    endpoints: dict[str, list[Endpoint]] = {}
    for tenant_id, (name, hosts) in TENANTS.items():
        tenant, _ = Tenant.objects.get_or_create(id=tenant_id, defaults={"name": name})
        endpoints[tenant_id] = []
        for n, host in enumerate(hosts):
            endpoint, _ = Endpoint.objects.get_or_create(
                id=f"ep_demo_{tenant_id[9:]}_{n}",
                defaults={
                    "tenant": tenant,
                    "url": f"https://{host}/webhooks/homing",
                    "description": f"{name} {'primary' if n == 0 else 'secondary'} receiver",
                    "event_types": [] if n == 0 else ["order.*", "invoice.*"],
                    "secret": crypto.encrypt(generate_secret()),  # stored encrypted, as always
                    "owner": OWNERS[tenant_id],
                },
            )
            if endpoint.owner is None:  # seeded before endpoints had owners
                Endpoint.objects.filter(pk=endpoint.pk).update(owner=OWNERS[tenant_id])
                endpoint.owner = OWNERS[tenant_id]
            endpoints[tenant_id].append(endpoint)
    return endpoints


# One row per delivery to make: who, when, whether it dies and after how many tries.
# Retries follow a shortened schedule (attempt n at 5 * (2^n - 2) s); a dead delivery
# starts at least 45 minutes ago, so its whole history lies in the past. 40 % of the
# rows fall in the last 6 hours, so the dashboard's chart has something to show.
PLAN_SQL = """
CREATE TEMP TABLE demo_plan ON COMMIT DROP AS
SELECT p.*,
  CASE WHEN dies AND fatal THEN 1 WHEN dies THEN 3 + floor(r2 * 7)::int
       WHEN r1 < 0.12 THEN 2 ELSE 1 END AS tries,
  CASE WHEN dies AND fatal THEN (ARRAY[404, 400, 410])[1 + floor(r2 * 3)::int]
       WHEN dies THEN (ARRAY[500, 502, 503, 503, 504])[1 + floor(r2 * 5)::int]
       ELSE 200 END AS code
FROM (
  SELECT g AS i, r1, r2, g <= %(dead)s AS dies, g <= %(dead)s AND r1 < 0.3 AS fatal,
    'evt_' || substr(md5(random()::text || g), 1, 26) AS event_id,
    'dlv_' || substr(md5(random()::text || g), 1, 26) AS delivery_id,
    (%(endpoints)s::text[])[1 + e] AS endpoint_id,
    (%(tenants)s::text[])[1 + e] AS tenant_id,
    (%(types)s::text[])[1 + floor(random() * %(type_count)s)::int] AS event_type,
    CASE WHEN g <= %(dead)s THEN least(t, now() - interval '45 minutes') ELSE t END AS created_at
  FROM (
    SELECT g, random() AS r1, random() AS r2,
      floor(random() * %(endpoint_count)s)::int AS e,
      now() - CASE WHEN random() < 0.4 THEN interval '1 minute' + random() * interval '6 hours'
                   ELSE interval '6 hours' + random() * interval '162 hours' END AS t
    FROM generate_series(1, %(deliveries)s) AS g
  ) AS picked
) AS p
"""

STEPS = [
    (
        "events",
        """INSERT INTO {event} (id, tenant_id, type, data, created_at)
        SELECT event_id, tenant_id, event_type, jsonb_build_object(
            'id', split_part(event_type, '.', 1) || '_' || i,
            'amount', 500 + floor(r1 * 250000)::int,
            'currency', (ARRAY['EUR', 'USD', 'GBP'])[1 + floor(r2 * 3)::int],
            'customer', jsonb_build_object('id', 'cus_' || (i * 7 % 100000),
                                           'email', 'customer' || i || '@example.com'),
            'lines', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || (100 + i % 900),
                                                          'qty', 1 + i % 4))),
          created_at
        FROM demo_plan""",
    ),
    (
        "deliveries",
        # Numbered after the endpoint's deliveries so far, in time order (sequences.py).
        """WITH sequences AS (
          INSERT INTO {sequencecounter} (endpoint_id, last, purged_through)
          SELECT endpoint_id, count(*), 0 FROM demo_plan GROUP BY endpoint_id
          ORDER BY endpoint_id
          ON CONFLICT (endpoint_id) DO UPDATE SET last = {sequencecounter}.last + EXCLUDED.last
          RETURNING endpoint_id, last
        )
        INSERT INTO {delivery} (id, tenant_id, event_id, endpoint_id, status, attempt_count,
            schedule_offset, last_error, created_at, updated_at, sequence)
        SELECT delivery_id, tenant_id, event_id, endpoint_id,
          CASE WHEN dies THEN 'dead' ELSE 'succeeded' END, tries, 0,
          CASE WHEN dies THEN 'HTTP ' || code ELSE '' END, created_at,
          created_at + (5 * (2 ^ tries - 2)) * interval '1 second',
          s.last - count(*) OVER (PARTITION BY endpoint_id)
            + row_number() OVER (PARTITION BY endpoint_id ORDER BY created_at, i)
        FROM demo_plan JOIN sequences AS s USING (endpoint_id)""",
    ),
    (
        "attempts",
        """INSERT INTO {attempt} (delivery_id, number, started_at, duration_ms, status_code,
            error, response_body)
        SELECT delivery_id, n, created_at + (5 * (2 ^ n - 2)) * interval '1 second',
          20 + floor(random() * 880)::int, s, CASE WHEN s = 200 THEN '' ELSE 'HTTP ' || s END,
          CASE WHEN s = 200 THEN '{{"ok":true}}' ELSE 'upstream answered ' || s END
        FROM demo_plan, generate_series(1, tries) AS n,
          LATERAL (SELECT CASE WHEN dies OR n < tries THEN
                     CASE WHEN dies THEN code ELSE 503 END ELSE 200 END AS s) AS answer""",
    ),
    (
        "dead letters",
        # With what a replay re-creates the rows from once retention dropped them.
        """INSERT INTO {deadletter} (id, tenant_id, delivery_id, event_id, endpoint_id,
            event_type, reason, dead_at, sequence, attempt_count, delivery_created_at,
            event_data, event_created_at)
        SELECT 'dl_' || substr(md5(random()::text || p.i), 1, 26), p.tenant_id, p.delivery_id,
          p.event_id, p.endpoint_id, p.event_type,
          CASE WHEN p.fatal THEN 'HTTP ' || p.code || ' (not retryable)'
               ELSE 'HTTP ' || p.code || ' after ' || p.tries || ' attempts' END,
          p.created_at + (5 * (2 ^ p.tries - 2)) * interval '1 second',
          d.sequence, p.tries, p.created_at, e.data, p.created_at
        FROM demo_plan AS p
          JOIN {delivery} AS d ON d.id = p.delivery_id
          JOIN {event} AS e ON e.id = p.event_id
        WHERE p.dies""",
    ),
    (
        "attempts per minute",
        """INSERT INTO {attemptminute} (minute, outcome, count)
        SELECT date_trunc('minute', a.started_at),
          CASE WHEN a.status_code = 200 THEN 'success'
               WHEN a.status_code < 500 THEN 'fatal' ELSE 'retryable' END, count(*)
        FROM {attempt} AS a JOIN demo_plan USING (delivery_id)
        GROUP BY 1, 2
        ON CONFLICT (minute, outcome)
        DO UPDATE SET count = {attemptminute}.count + EXCLUDED.count""",
    ),
]


def demo_data_seed(
    *, dead_letters: int, attempts: int, progress: Callable[[str], None] = lambda _: None
) -> SeedReport:
    endpoints = [e for group in demo_setup().values() for e in group]
    demo = list(TENANTS)
    have_letters = DeadLetter.objects.filter(tenant_id__in=demo).count()
    have_attempts = Attempt.objects.filter(delivery__tenant_id__in=demo).count()
    dead = max(dead_letters - have_letters, 0)
    succeeded = max(
        round((attempts - have_attempts - dead * DEAD_ATTEMPTS) / SUCCEEDED_ATTEMPTS), 0
    )
    progress(
        f"demo data has {have_letters} dead letters and {have_attempts} attempts; adding "
        f"{dead} dead and {succeeded} succeeded deliveries"
    )
    if not dead and not succeeded:
        return SeedReport(0, 0, 0, 0)
    tables = {
        "event": Event._meta.db_table,
        "delivery": Delivery._meta.db_table,
        "sequencecounter": SequenceCounter._meta.db_table,
        "attempt": Attempt._meta.db_table,
        "deadletter": DeadLetter._meta.db_table,
        "attemptminute": AttemptMinute._meta.db_table,
    }
    params: dict[str, Any] = {
        "dead": dead,
        "deliveries": dead + succeeded,
        "endpoints": [e.id for e in endpoints],
        "tenants": [e.tenant_id for e in endpoints],
        "endpoint_count": len(endpoints),
        "types": EVENT_TYPES,
        "type_count": len(EVENT_TYPES),
    }
    counts: dict[str, int] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('is_superuser') = 'on'")
        if cursor.fetchone()[0]:
            # Every row refers to rows made in this same transaction: skipping the
            # per-row foreign-key triggers halves the load time (superusers only).
            cursor.execute("SET LOCAL session_replication_role = replica")
        started = time.monotonic()
        cursor.execute(PLAN_SQL, params)
        progress(f"  planned {dead + succeeded} deliveries ({time.monotonic() - started:.1f} s)")
        for name, sql in STEPS:
            started = time.monotonic()
            cursor.execute(sql.format(**tables))
            counts[name] = cursor.rowcount
            progress(f"  {name}: {cursor.rowcount} rows ({time.monotonic() - started:.1f} s)")
    started = time.monotonic()
    _analyze()
    progress(f"  vacuum analyze ({time.monotonic() - started:.1f} s)")
    return SeedReport(
        dead_letters=counts["dead letters"],
        attempts=counts["attempts"],
        events=counts["events"],
        deliveries=counts["deliveries"],
    )


def _analyze() -> None:
    """Fresh statistics and visibility maps: the console's estimates and index-only
    counts depend on them right after a bulk load."""
    with connection.cursor() as cursor:
        for model in (Event, Delivery, Attempt, DeadLetter):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
