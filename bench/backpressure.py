"""The cost of backpressure at intake: `python -m bench.backpressure [--backlog N]`.

Starts a throwaway PostgreSQL and Redis (tests/harness.py), then measures in this
process, through Django's test client (the whole middleware stack and the intake view,
no HTTP server), CPU per request of:

- `POST /api/v1/events` answered 202 with no limit set, and with an event rate set (the
  check is then one Redis round trip: the window script);
- the same POST answered 429 `rate_limited` and 429 `backlog_full`;
- the check alone (`intake_admit`), per event;
- the bounded backlog count at a tenant's limit (`--backlog` unfinished deliveries,
  1,000,000 by default, seeded in one INSERT): what a tenant at its limit costs each web
  process once per second.

Prints one line per figure. `make bench` runs it at its end (bench/run.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from bench.throwaway import django_on_throwaway_servers

ROUNDS = 2000


def _cpu_per_call(call: Callable[[], object], rounds: int) -> tuple[float, float]:
    """Median-of-5 CPU and wall microseconds per call, after a warm-up."""
    for _ in range(min(200, rounds)):
        call()
    cpus, walls = [], []
    for _ in range(5):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(rounds // 5):
            call()
        cpus.append((time.process_time() - cpu0) / (rounds // 5) * 1e6)
        walls.append((time.perf_counter() - wall0) / (rounds // 5) * 1e6)
    return statistics.median(cpus), statistics.median(walls)


def backpressure_bench(*, backlog: int, rounds: int) -> list[tuple[str, float, float]]:
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from deliveries.intake import backpressure
    from deliveries.intake.backlog import tenant_unfinished_count
    from webhooks.models import Endpoint, Tenant
    from webhooks.services.endpoints import endpoint_create
    from webhooks.services.tenants import tenant_create

    settings.HOMING_ALLOW_PRIVATE_NETWORKS = True
    rows = []
    body = '{"type": "order.paid", "data": {"order": 42}}'

    def client_for(name: str) -> tuple[Client, Tenant]:
        tenant, key = tenant_create(name=name)
        endpoint_create(tenant=tenant, url="http://127.0.0.1:9/hook")
        return Client(HTTP_AUTHORIZATION=f"Bearer {key}"), tenant

    def poster(client: Client, status: int, *also: int) -> Callable[[], object]:
        def post() -> object:
            response = client.post("/api/v1/events", body, content_type="application/json")
            if response.status_code != status and response.status_code not in also:
                raise RuntimeError(f"expected {status}, got {response.status_code}")
            return response

        return post

    client, _ = client_for("bench no limit")
    settings.HOMING_TENANT_EVENT_RATE = None
    rows.append(("POST /events 202, no event rate", *_cpu_per_call(poster(client, 202), rounds)))
    settings.HOMING_TENANT_EVENT_RATE = 10**9
    rows.append(("POST /events 202, event rate set", *_cpu_per_call(poster(client, 202), rounds)))

    settings.HOMING_TENANT_EVENT_RATE = 1
    limited, _ = client_for("bench rate limited")
    poster(limited, 202)()  # its one event of the second: every later one is refused
    # One event a second still gets through (202): a negligible share of the rounds.
    rate_limited = poster(limited, 429, 202)
    rows.append(("POST /events 429 rate_limited", *_cpu_per_call(rate_limited, rounds)))
    settings.HOMING_TENANT_EVENT_RATE = None
    settings.HOMING_TENANT_MAX_BACKLOG = 1
    full, _ = client_for("bench backlog full")
    poster(full, 202)()  # its one pending delivery fills its backlog
    rows.append(("POST /events 429 backlog_full", *_cpu_per_call(poster(full, 429), rounds)))

    settings.HOMING_TENANT_MAX_BACKLOG = 10**9
    settings.HOMING_TENANT_EVENT_RATE = 10**9
    _, tenant = client_for("bench check")
    rows.append(
        (
            "intake_admit alone (Redis window)",
            *_cpu_per_call(lambda: backpressure.intake_admit(tenant=tenant, events=1), rounds),
        )
    )
    settings.HOMING_TENANT_EVENT_RATE = None
    rows.append(
        (
            "intake_admit alone (no rate)",
            *_cpu_per_call(lambda: backpressure.intake_admit(tenant=tenant, events=1), rounds),
        )
    )

    _, deep = client_for("bench deep backlog")
    endpoint = Endpoint.objects.get(tenant=deep)
    with connection.cursor() as cursor:
        # One event, `backlog` pending deliveries of it: the rows the count walks.
        cursor.execute(
            "INSERT INTO webhooks_event (id, tenant_id, type, data, created_at) "
            "VALUES ('evt_bench', %s, 'bench.deep', '{}', now())",
            [deep.pk],
        )
        cursor.execute(
            "INSERT INTO deliveries_delivery (id, tenant_id, event_id, endpoint_id, status, "
            "attempt_count, schedule_offset, next_attempt_at, last_error, created_at, "
            "updated_at, sequence) SELECT 'dlv_bench' || n, %s, 'evt_bench', %s, 'pending', "
            "0, 0, now(), '', now(), now(), n FROM generate_series(1, %s) AS n",
            [deep.pk, endpoint.pk, backlog],
        )
        cursor.execute("VACUUM ANALYZE deliveries_delivery")
    started_cpu, started = time.process_time(), time.perf_counter()
    counted = tenant_unfinished_count(tenant_id=deep.pk, most=backlog)
    wall = (time.perf_counter() - started) * 1e6
    assert counted == backlog, counted
    rows.append(
        (
            f"backlog count at a limit of {backlog:,}",
            (time.process_time() - started_cpu) * 1e6,
            wall,
        )
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()

    with django_on_throwaway_servers(
        "backpressure", redis=True, ALLOWED_HOSTS="testserver,localhost", LOG_LEVEL="ERROR"
    ):
        rows = backpressure_bench(backlog=args.backlog, rounds=args.rounds)
        print(f"{'backpressure':<44} {'CPU µs':>9} {'wall µs':>9}")
        for name, cpu, wall in rows:
            print(f"{name:<44} {cpu:>9.0f} {wall:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
