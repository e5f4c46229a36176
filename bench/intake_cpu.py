"""CPU per single-event POST in the web process, without gunicorn:
`python -m bench.intake_cpu [--slices N] [--per-slice N]`.

Starts a throwaway PostgreSQL and Redis (tests/harness.py), makes a tenant with one
endpoint, then calls the web process's WSGI application (config/wsgi.py: middleware, the
intake view, the insert) directly with a request as gunicorn hands it over, with the
publisher's and counters' background threads started as in gunicorn. Prints the median
and the lowest of the slices' CPU per request (this process's CPU, its threads included;
PostgreSQL's is its own, printed beside it from /proc). On a machine other processes
load, the lowest slice moves least: compare two trees by running this in each, one after
the other, a few times.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.throwaway import django_on_throwaway_servers

BODY = b'{"type": "order.paid", "data": {"order": 42, "customer": "cus_123", "amount": 1999}}'


def _environ(key: str) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/events",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(BODY)),
        "HTTP_AUTHORIZATION": f"Bearer {key}",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }


def intake_cpu(*, slices: int, per_slice: int) -> None:
    from django.db import connection

    from config.wsgi import application
    from core.background import close_gatherers, start_gatherers
    from webhooks.services.endpoints import endpoint_create
    from webhooks.services.tenants import tenant_create

    tenant, key = tenant_create(name="bench intake cpu")
    endpoint_create(tenant=tenant, url="http://127.0.0.1:9/hook")
    base = _environ(key)
    statuses: list[str] = []

    def start_response(status: str, headers: list, exc_info: Any = None) -> None:
        statuses.append(status)

    def post() -> None:
        result = application({**base, "wsgi.input": io.BytesIO(BODY)}, start_response)
        b"".join(result)
        result.close()  # type: ignore[attr-defined]  # a Django response has it

    gatherers = start_gatherers()
    try:
        for _ in range(300):  # warm-up: caches, the prepared statement
            post()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        postgres_before = _process_cpu(backend)
        cpus = []
        for _ in range(slices):
            started = time.process_time()
            for _ in range(per_slice):
                post()
            cpus.append((time.process_time() - started) / per_slice * 1e6)
        postgres = (_process_cpu(backend) - postgres_before) / (slices * per_slice) * 1e6
    finally:
        close_gatherers(gatherers)
    refused = {status for status in statuses if not status.startswith("202")}
    if refused:
        raise RuntimeError(f"some POSTs were not accepted: {refused}")
    print(
        f"POST /api/v1/events, web process CPU per request: median {statistics.median(cpus):.0f}"
        f" µs, lowest slice {min(cpus):.0f} µs ({slices} slices of {per_slice}); "
        f"PostgreSQL backend {postgres:.0f} µs"
    )


def _process_cpu(pid: int) -> float:
    """Seconds of CPU a process (here: the PostgreSQL backend) has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=10)
    parser.add_argument("--per-slice", type=int, default=250)
    args = parser.parse_args()

    with django_on_throwaway_servers(
        "intake-cpu",
        redis=True,
        ALLOWED_HOSTS="127.0.0.1",
        LOG_LEVEL="ERROR",
        HOMING_ALLOW_PRIVATE_NETWORKS="true",
    ):
        intake_cpu(slices=args.slices, per_slice=args.per_slice)
    return 0


if __name__ == "__main__":
    sys.exit(main())
