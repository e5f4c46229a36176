"""What partitioned history costs (issue 35's targets): `python -m bench.partition_costs`.

On a throwaway PostgreSQL and Redis, in this process, with the default one-day interval:

1. **Latency with 30 partitions of history.** Ingestion (`event_ingest`, one event a
   call), claim (`deliveries_claim`, 10 a call) and recording (`attempts_record` of what
   was claimed: claim + record is the drain's database work per delivery), p50/p99, on
   the partitioned tables holding 30 past days' partitions of `--history-rows` rows
   each, and on unpartitioned empty tables (copies of the three made in a schema of
   their own, put first on the search path: what an installation before partitions ran
   on), in `--slices` alternating slices, each after a VACUUM ANALYZE of both (so the
   machine's load and the dead index entries of earlier claims fall on both alike);
   their ratio.
2. **Time per drop.** For each of `--rows` (100,000 and 5,000,000): one interval filled
   with that many rows (a third each events, deliveries and attempts, by INSERT ...
   SELECT generate_series), ANALYZEd, then dropped by the real service
   (`partitions_drop_expired`); its rows and milliseconds, and how long it held the
   history tables' locks (and the next two, empty, intervals' for comparison).

3. **Time a create locks DEFAULT** when DEFAULT holds `--default-rows` rows: a plain
   CREATE + ATTACH (PostgreSQL scans DEFAULT under the lock) against the service's
   (a constraint validated first, without blocking anyone, spares the scan).

Prints one line per figure and `BENCH_PARTITIONS_JSON {...}`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

from bench.load import percentile
from bench.throwaway import django_on_throwaway_servers

DAY = 86_400_000
HEADS = 1000  # distinct milliseconds the ids of one interval are made at
DATA = {
    "order_id": "ord_0000000042",
    "amount": 4200,
    "currency": "EUR",
    "customer": {"id": "cus_0987654321", "email": "alice@example.com"},
    "items": [{"sku": "SKU-1", "qty": 2}, {"sku": "SKU-2", "qty": 1}],
}

# One interval's rows: ids `<prefix>_<head><16 hex>`, the head one of the interval's
# milliseconds (core/ids.py: the time is the first 10 characters), hex digits being in
# the alphabet; deliveries spread over the endpoints, all succeeded with one attempt.
FILL = [
    """INSERT INTO webhooks_event (id, tenant_id, type, data, created_at)
    SELECT 'evt_' || (%(heads)s::text[])[1 + g %% %(m)s] || substr(md5(g::text), 1, 16),
        %(tenant)s, 'order.paid', %(data)s::jsonb, %(at)s
    FROM generate_series(1, %(n)s) g""",
    """INSERT INTO deliveries_delivery (id, tenant_id, event_id, endpoint_id, status,
        attempt_count, schedule_offset, last_error, sequence, created_at, updated_at)
    SELECT 'dlv_' || h || x, %(tenant)s, 'evt_' || h || x,
        (%(endpoints)s::text[])[1 + g %% cardinality(%(endpoints)s::text[])], 'succeeded',
        1, 0, '', g, %(at)s, %(at)s
    FROM generate_series(1, %(n)s) g,
        LATERAL (SELECT (%(heads)s::text[])[1 + g %% %(m)s] AS h,
                        substr(md5(g::text), 1, 16) AS x) ids""",
    """INSERT INTO deliveries_attempt (delivery_id, number, started_at, duration_ms,
        status_code, error, response_body)
    SELECT 'dlv_' || (%(heads)s::text[])[1 + g %% %(m)s] || substr(md5(g::text), 1, 16),
        1, %(at)s, 12, 200, '', ''
    FROM generate_series(1, %(n)s) g""",
]


def fill(*, start_ms: int, length_ms: int, rows: int, tenant: str, endpoints: list[str]) -> int:
    """`rows` rows (a third each table) in the interval from start_ms; how many."""
    from datetime import UTC, datetime

    from django.db import connection

    from core.ids import id_floor

    step = max(1, length_ms // HEADS)
    heads = [id_floor("x", start_ms + i * step)[2:12] for i in range(HEADS)]
    at = datetime.fromtimestamp((start_ms + length_ms // 2) / 1000, tz=UTC)
    n = rows // 3
    params: dict[str, Any] = {
        "heads": heads,
        "m": HEADS,
        "n": n,
        "tenant": tenant,
        "endpoints": endpoints,
        "data": json.dumps(DATA),
        "at": at,
    }
    with connection.cursor() as cursor:
        for statement in FILL:
            cursor.execute(statement, params)
        cursor.execute("ANALYZE webhooks_event, deliveries_delivery, deliveries_attempt")
    return 3 * n


def timings(*, tenant: Any, rounds: int) -> dict[str, list[float]]:
    """Seconds of ingesting `rounds` events one by one, then of claiming them 10 at a
    time and recording each claim's attempts (all 200)."""
    from django.utils import timezone

    from deliveries.intake.ingest import event_ingest
    from deliveries.lifecycle.partitions import claim_bounds
    from deliveries.lifecycle.policy import current_policy
    from deliveries.lifecycle.recording import Attempted, attempts_record
    from deliveries.results import SendResult
    from deliveries.worker.claims import deliveries_claim

    found: dict[str, list[float]] = {
        "ingest": [], "claim_10": [], "record_10": [], "drain_per_delivery": []
    }  # fmt: skip
    for i in range(rounds):
        t0 = time.perf_counter()
        event_ingest(tenant=tenant, event_type="order.paid", data={**DATA, "n": i})
        found["ingest"].append(time.perf_counter() - t0)
    policy = current_policy()
    bounds = claim_bounds()  # as a worker reads them (every 5 s)
    while True:
        t0 = time.perf_counter()
        claimed = deliveries_claim(limit=10, policy=policy, bounds=bounds)
        t1 = time.perf_counter()
        if not claimed:
            break
        attempts_record(
            outcomes=[
                Attempted(d, SendResult(200, None, b"ok", None, 12), timezone.now(), policy)
                for d in claimed
            ]
        )
        t2 = time.perf_counter()
        found["claim_10"].append(t1 - t0)
        found["record_10"].append(t2 - t1)
        found["drain_per_delivery"].append((t2 - t0) / len(claimed))
    return found


def summary(found: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        name: {
            "n": len(values),
            "p50_ms": round(percentile(values, 50) * 1000, 2),
            "p99_ms": round(percentile(values, 99) * 1000, 2),
        }
        for name, values in found.items()
    }


def history_latency(
    *, history_rows: int, partitions: int, rounds: int, slices: int
) -> dict[str, Any]:
    """Unpartitioned empty tables and partitioned ones with `partitions` days of history,
    measured in alternating slices (so that the machine's load falls on both alike)."""
    from django.conf import settings

    from core.clock import database_now
    from deliveries.lifecycle.partitions import partitions_drop_expired, partitions_ensure
    from webhooks.models import Tenant

    tenant, endpoints = _tenant_with_endpoints("latency", 10)
    now = int(database_now().timestamp() * 1000)
    first = (now // DAY * DAY) - (partitions + 1) * DAY  # yesterday stays empty
    partitions_ensure(since_ms=first)
    started = time.monotonic()
    for day in range(partitions):
        fill(
            start_ms=first + day * DAY,
            length_ms=DAY,
            rows=history_rows,
            tenant=tenant,
            endpoints=endpoints,
        )
    say(f"filled {partitions} days' partitions with {history_rows:,} rows each in "
        f"{time.monotonic() - started:.0f} s")  # fmt: skip
    sides: dict[str, dict[str, list[float]]] = {PLAIN: {}, "public": {}}
    with unpartitioned_tables():
        for k in range(slices):
            for schema in (PLAIN, "public") if k % 2 == 0 else ("public", PLAIN):
                tables_first_from(schema)
                vacuumed()
                found = timings(tenant=Tenant.objects.get(pk=tenant), rounds=rounds // slices)
                for name, values in found.items():
                    sides[schema].setdefault(name, []).extend(values)
            say(f"slice {k + 1} of {slices} of each")
    settings.HOMING_RETENTION = 1
    partitions_drop_expired()  # the drops measured next find their own intervals only
    plain, full = summary(sides[PLAIN]), summary(sides["public"])
    qs = ("p50_ms", "p99_ms")
    ratio = {name: {q: round(full[name][q] / plain[name][q], 2) for q in qs} for name in full}
    return {"unpartitioned": plain, "with_history": full, "ratio": ratio}


HISTORY_TABLES = ("webhooks_event", "deliveries_delivery", "deliveries_attempt")
PLAIN = "unpartitioned"


@contextlib.contextmanager
def unpartitioned_tables() -> Iterator[None]:
    """Plain copies of the three history tables (columns, defaults, checks, indexes and
    foreign keys), empty, in a schema of their own (tables_first_from puts it first on
    this connection's search path: the partitioned tables are then out of sight)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA {PLAIN}")
        for table in HISTORY_TABLES:
            cursor.execute(f"CREATE TABLE {PLAIN}.{table} (LIKE public.{table} INCLUDING ALL)")
            cursor.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = %s::regclass AND contype = 'f'",
                [f"public.{table}"],
            )
            for name, definition in cursor.fetchall():
                cursor.execute(f"ALTER TABLE {PLAIN}.{table} ADD CONSTRAINT {name} {definition}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET search_path")
            cursor.execute(f"DROP SCHEMA {PLAIN} CASCADE")


def tables_first_from(schema: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SET search_path = {schema}, public")


def vacuumed() -> None:
    from django.db import connection

    tables = [f"{schema}.{t}" for schema in (PLAIN, "public") for t in HISTORY_TABLES]
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {', '.join(tables)}")


def drop_costs(*, sizes: list[int]) -> list[dict[str, Any]]:
    from django.conf import settings

    from core.clock import database_now
    from deliveries.lifecycle.partitions import partitions_drop_expired, partitions_ensure

    tenant, endpoints = _tenant_with_endpoints("drops", 10)
    settings.HOMING_RETENTION = 1
    now = int(database_now().timestamp() * 1000)
    found = []
    for k, rows in enumerate(sizes):
        start = (now - (60 + 10 * k) * DAY) // DAY * DAY
        partitions_ensure(since_ms=start, now_ms=start)  # it and the next two
        t0 = time.monotonic()
        made = fill(start_ms=start, length_ms=DAY, rows=rows, tenant=tenant, endpoints=endpoints)
        say(f"filled one interval with {made:,} rows in {time.monotonic() - t0:.0f} s")
        for outcome in partitions_drop_expired():
            filled = outcome.span.startswith(_day(start))
            found.append(
                {
                    "rows": made if filled else 0,
                    "ms": round(outcome.seconds * 1000, 1),
                    "locked_ms": round(outcome.locked * 1000, 1),
                    "action": outcome.action,
                    "span": outcome.span,
                }
            )
            say(
                f"  {outcome.action} {outcome.span}: {found[-1]['rows']:,} rows, "
                f"{found[-1]['ms']} ms, the history tables locked for {found[-1]['locked_ms']} ms"
            )
    return found


def create_costs(*, default_rows: int) -> dict[str, Any]:
    """How long creating a partition locks DEFAULT when DEFAULT holds `default_rows`
    events (a converted installation's ids made before the current alphabet): a plain
    CREATE + ATTACH, which scans DEFAULT under its lock, against the service's."""
    from django.conf import settings
    from django.db import connection, transaction

    from core.clock import database_now
    from deliveries.lifecycle.partitions import EVENTS, partitions_ensure

    tenant, _ = _tenant_with_endpoints("creates", 1)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO webhooks_event (id, tenant_id, type, data, created_at)"
            " SELECT 'evt_z' || substr(md5(g::text), 1, 26), %s, 'order.paid', %s::jsonb, now()"
            " FROM generate_series(1, %s) g",
            [tenant, json.dumps(DATA), default_rows],
        )
        cursor.execute("VACUUM ANALYZE webhooks_event_default")
    say(f"DEFAULT of webhooks_event holds {default_rows:,} rows")
    settings.HOMING_PARTITION_INTERVAL = 86_400
    far = int(database_now().timestamp() * 1000) // DAY * DAY + 100 * DAY
    plain = f"{EVENTS.table}_plain_attach"
    t0 = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {plain} (LIKE {EVENTS.table} INCLUDING DEFAULTS)")
        cursor.execute(
            f"ALTER TABLE {EVENTS.table} ATTACH PARTITION {plain} FOR VALUES FROM (%s) TO (%s)",
            [EVENTS.bound(far), EVENTS.bound(far + DAY)],
        )
    scanned = time.monotonic() - t0
    created = [
        o
        for o in partitions_ensure(now_ms=far + 10 * DAY)
        if o.action == "created" and o.partitions[0].startswith(EVENTS.table)
    ]
    ahead = created[-1]  # two intervals ahead: the constraint's way
    figures = {
        "default_rows": default_rows,
        "plain_attach_locked_ms": round(scanned * 1000, 1),
        "service_locked_ms": round(ahead.locked * 1000, 1),
        "service_total_ms": round(ahead.seconds * 1000, 1),
    }
    say(
        f"creating a partition beside that DEFAULT: a plain ATTACH locked it for "
        f"{figures['plain_attach_locked_ms']} ms; the service {figures['service_locked_ms']} ms"
        f" ({figures['service_total_ms']} ms in all, its constraint validated meanwhile)"
    )
    return figures


def _day(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def _tenant_with_endpoints(name: str, count: int) -> tuple[str, list[str]]:
    from webhooks.services.endpoints import endpoint_create
    from webhooks.services.tenants import tenant_create

    tenant, _ = tenant_create(name=name)
    endpoints = [
        endpoint_create(tenant=tenant, url=f"http://127.0.0.1:9/{name}/{i}").pk
        for i in range(count)
    ]
    return tenant.pk, endpoints


def say(message: str) -> None:
    print(f"[partitions {time.strftime('%H:%M:%S')}] {message}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[100_000, 5_000_000],
        help="rows of the interval each drop removes",
    )
    parser.add_argument("--history-partitions", type=int, default=30)
    parser.add_argument("--history-rows", type=int, default=30_000, help="rows per partition")
    parser.add_argument("--rounds", type=int, default=2000, help="events per side")
    parser.add_argument("--slices", type=int, default=10, help="alternations of the sides")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--default-rows",
        type=int,
        default=1_000_000,
        help="rows in DEFAULT when a partition is created beside it (0: skip)",
    )
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with django_on_throwaway_servers(
        "partitions", redis=True, HOMING_ALLOW_PRIVATE_NETWORKS="true", LOG_LEVEL="WARNING"
    ):
        if not args.skip_latency:
            results["latency"] = latency = history_latency(
                history_rows=args.history_rows,
                partitions=args.history_partitions,
                rounds=args.rounds,
                slices=args.slices,
            )
            for name, ratio in latency["ratio"].items():
                u, h = latency["unpartitioned"][name], latency["with_history"][name]
                say(
                    f"{name}: p50 {u['p50_ms']} -> {h['p50_ms']} ms, p99 {u['p99_ms']} -> "
                    f"{h['p99_ms']} ms, unpartitioned -> {args.history_partitions} partitions"
                    f" of history (ratio p50 {ratio['p50_ms']}, p99 {ratio['p99_ms']})"
                )
        results["drops"] = drop_costs(sizes=args.rows)
        if args.default_rows:
            results["create"] = create_costs(default_rows=args.default_rows)
    print("BENCH_PARTITIONS_JSON " + json.dumps(results, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
