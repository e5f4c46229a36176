"""What partitioned history costs (issue 35's targets): `python -m bench.partition_costs`.

On a throwaway PostgreSQL and Redis, in this process, with the default one-day interval:

1. **Latency with 30 partitions of history.** Ingestion (`event_ingest`, one event a
   call), claim (`deliveries_claim`, 10 a call) and recording (`attempts_record` of what
   was claimed: claim + record is the drain's database work per delivery), p50/p99, on
   the fresh database (the migration's partitions, empty), then with 30 past days' partitions
   holding `--history-rows` rows each, then again after those were dropped; the
   ratio of the middle one to the mean of the two others.
2. **Time per drop.** For each of `--rows` (100,000 and 5,000,000): one interval filled
   with that many rows (a third each events, deliveries and attempts, by INSERT ...
   SELECT generate_series), ANALYZEd, then dropped by the real service
   (`partitions_drop_expired`); its rows and milliseconds (and the next two, empty,
   intervals' for comparison).

Prints one line per figure and `BENCH_PARTITIONS_JSON {...}`.
"""

from __future__ import annotations

import argparse
import json
import time
from statistics import mean
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


def latencies(*, tenant: Any, rounds: int) -> dict[str, dict[str, float]]:
    """p50/p99 ms of ingesting `rounds` events one by one, then of claiming them 10 at a
    time and recording each claim's attempts (all 200)."""
    from django.utils import timezone

    from deliveries.intake.ingest import event_ingest
    from deliveries.lifecycle.partitions import claim_floors
    from deliveries.lifecycle.policy import current_policy
    from deliveries.lifecycle.recording import Attempted, attempts_record
    from deliveries.results import SendResult
    from deliveries.worker.claims import deliveries_claim

    ingest, claim, record, per_delivery = [], [], [], []
    for i in range(rounds):
        t0 = time.perf_counter()
        event_ingest(tenant=tenant, event_type="order.paid", data={**DATA, "n": i})
        ingest.append(time.perf_counter() - t0)
    policy = current_policy()
    floors = claim_floors()  # as a worker reads them (every 5 s)
    while True:
        t0 = time.perf_counter()
        claimed = deliveries_claim(limit=10, policy=policy, floors=floors)
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
        claim.append(t1 - t0)
        record.append(t2 - t1)
        per_delivery.append((t2 - t0) / len(claimed))
    return {
        name: {
            "n": len(values),
            "p50_ms": round(percentile(values, 50) * 1000, 2),
            "p99_ms": round(percentile(values, 99) * 1000, 2),
        }
        for name, values in (
            ("ingest", ingest),
            ("claim_10", claim),
            ("record_10", record),
            ("drain_per_delivery", per_delivery),
        )
    }


def history_latency(*, history_rows: int, partitions: int, rounds: int) -> dict[str, Any]:
    from django.conf import settings

    from core.clock import database_now
    from deliveries.lifecycle.partitions import partitions_drop_expired, partitions_ensure
    from webhooks.models import Tenant

    tenant, endpoints = _tenant_with_endpoints("latency", 10)
    now = int(database_now().timestamp() * 1000)
    today = now // DAY * DAY
    say("latency on the fresh database (the migration's partitions, empty)")
    fresh = latencies(tenant=Tenant.objects.get(pk=tenant), rounds=rounds)
    first = today - (partitions + 1) * DAY  # yesterday stays empty
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
    say(
        f"filled {partitions} days' partitions with {history_rows:,} rows each in "
        f"{time.monotonic() - started:.0f} s; latency with them"
    )
    full = latencies(tenant=Tenant.objects.get(pk=tenant), rounds=rounds)
    settings.HOMING_RETENTION = 1
    dropped = [o for o in partitions_drop_expired() if o.action == "dropped"]
    say(f"dropped {len(dropped)} intervals; latency without them again")
    again = latencies(tenant=Tenant.objects.get(pk=tenant), rounds=rounds)
    ratios = {
        name: {
            q: round(full[name][q] / mean([fresh[name][q], again[name][q]]), 2)
            for q in ("p50_ms", "p99_ms")
        }
        for name in full
    }
    return {"fresh": fresh, "with_history": full, "fresh_again": again, "ratio": ratios}


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
                    "action": outcome.action,
                    "span": outcome.span,
                }
            )
            say(
                f"  {outcome.action} {outcome.span}: {found[-1]['rows']:,} rows, "
                f"{found[-1]['ms']} ms"
            )
    return found


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
    parser.add_argument("--rounds", type=int, default=1000, help="events per latency run")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with django_on_throwaway_servers(
        "partitions", redis=True, HOMING_ALLOW_PRIVATE_NETWORKS="true", LOG_LEVEL="WARNING"
    ):
        if not args.skip_latency:
            results["latency"] = history_latency(
                history_rows=args.history_rows,
                partitions=args.history_partitions,
                rounds=args.rounds,
            )
            for name, ratio in results["latency"]["ratio"].items():
                f, h = results["latency"]["fresh"][name], results["latency"]["with_history"][name]
                say(
                    f"{name}: p50 {f['p50_ms']} -> {h['p50_ms']} ms, p99 {f['p99_ms']} -> "
                    f"{h['p99_ms']} ms with {args.history_partitions} partitions of history "
                    f"(ratio to fresh: p50 {ratio['p50_ms']}, p99 {ratio['p99_ms']})"
                )
        results["drops"] = drop_costs(sizes=args.rows)
    print("BENCH_PARTITIONS_JSON " + json.dumps(results, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
