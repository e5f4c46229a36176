"""The bench's stack: the processes it starts (PostgreSQL, Redis, gunicorn, workers,
the scheduler, the receiver), HTTP and SQL helpers, set-up and teardown."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import procs
from tests.harness import Postgres, Redis, ensure_binaries, free_port, server_user, wait_for_port

ROOT = procs.ROOT
EVENT_TYPE = "order.paid"


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


ENDPOINTS = 1  # set from --endpoints


def event_body(i: int) -> bytes:
    return json.dumps(
        {
            "type": EVENT_TYPE if ENDPOINTS == 1 else f"{EVENT_TYPE}.{i % ENDPOINTS}",
            "data": {
                "order_id": f"ord_{i:010d}",
                "amount": 4200,
                "currency": "EUR",
                "customer": {"id": "cus_0987654321", "email": "alice@example.com"},
                "items": [{"sku": "SKU-1", "qty": 2}, {"sku": "SKU-2", "qty": 1}],
            },
        },
        separators=(",", ":"),
    ).encode()


class BenchError(Exception):
    pass


class Stack:
    # Set by setup(), start_web() and run(); read by the steps (bench/steps_*.py).
    api_key: str
    auth: dict[str, str]
    receiver_port: int
    other_host_port: int
    receiver_proc: procs.Managed
    cpu_pids: dict[str, int]
    web: procs.Managed
    web_port: int
    endpoint_secret: str
    profile_dir: Path

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="homing-bench-"))
        self.logs = self.workdir / "logs"
        self.logs.mkdir()
        self.started: list[procs.Managed] = []
        self.postgres: Postgres | None = None
        self.redis: Redis | None = None
        self.results: dict[str, Any] = {
            "quick": args.quick,
            "events": args.events,
            "endpoints": args.endpoints,
            "cpus": os.cpu_count(),
        }
        self.env: dict[str, str] = {}
        self.endpoint_secrets: list[str] = []

    # --- processes -------------------------------------------------------------------

    def start(self, name: str, args: list[str]) -> procs.Managed:
        process = procs.Managed(name, args, self.env, self.logs)
        self.started.append(process)
        return process

    def stop(self, *processes: procs.Managed) -> None:
        for process in processes:
            process.stop()
            if process in self.started:
                self.started.remove(process)

    def check_alive(self, *processes: procs.Managed) -> None:
        for process in processes:
            if not process.alive():
                raise BenchError(
                    f"{process.name} exited with {process.popen.returncode}; its log ends:\n"
                    f"{process.tail()}"
                )

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode:
            raise BenchError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    @contextlib.contextmanager
    def extra_env(self, **values: str) -> Iterator[None]:
        """Processes started inside get these environment variables too."""
        saved = self.env
        self.env = {**saved, **values}
        try:
            yield
        finally:
            self.env = saved

    def start_workers(self, count: int) -> list[procs.Managed]:
        """The Procfile's worker: run_worker supervising a Celery worker."""
        return [
            self.start(
                f"worker{i + 1}",
                [
                    sys.executable,
                    "manage.py",
                    "run_worker",
                    "--concurrency",
                    str(self.args.concurrency),
                    "--name",
                    f"bench{i + 1}",
                    "--loglevel",
                    "WARNING",
                ],
            )
            for i in range(count)
        ]

    def start_scheduler(self) -> procs.Managed:
        return self.start("scheduler", [sys.executable, "manage.py", "run_scheduler"])

    def start_gunicorn(self, name: str, app: str) -> tuple[procs.Managed, int]:
        port = free_port()
        process = self.start(
            name,
            [
                sys.executable,
                "-m",
                "gunicorn",
                app,
                "--worker-class",
                "config.gunicorn.BalancedThreadWorker",  # as the Procfile
                "--workers",
                str(self.args.web_workers),
                "--threads",
                str(self.args.web_threads),
                "--bind",
                f"127.0.0.1:{port}",
            ],
        )
        return process, port

    # --- HTTP helpers ------------------------------------------------------------------

    def http(
        self,
        port: int,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def receiver(self, method: str, path: str) -> bytes:
        status, data = self.http(self.receiver_port, method, path)
        if status != 200:
            raise BenchError(f"receiver answered {status} to {path}")
        return data

    def received_count(self) -> int:
        return int(self.receiver("GET", "/_count"))

    def wait_http(self, port: int, path: str, process: procs.Managed, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            self.check_alive(process)
            try:
                status, _ = self.http(port, "GET", path)
                if status == 200:
                    return
                last = status
            except OSError as exc:
                last = exc
            time.sleep(0.2)
        raise BenchError(f"{process.name} did not answer 200 on {path} ({last})")

    def check_servers(self) -> None:
        """Fail fast, instead of waiting out every time limit, if a server has died."""
        if self.redis and self.redis.process and self.redis.process.poll() is not None:
            raise BenchError(f"redis-server exited (code {self.redis.process.returncode})")
        if self.postgres and not (self.postgres.datadir / "postmaster.pid").exists():
            raise BenchError("PostgreSQL is no longer running (no postmaster.pid)")

    def wait_received(
        self, count: int, watch: list[procs.Managed], timeout: float, stall: float = 60
    ) -> bool:
        """Poll the receiver until it has `count` requests; False if it stalls."""
        deadline = time.monotonic() + timeout
        seen, progressed, reported = -1, time.monotonic(), time.monotonic()
        while time.monotonic() < deadline:
            self.check_alive(*watch)
            self.check_servers()
            now_seen = self.received_count()
            if now_seen >= count:
                return True
            now = time.monotonic()
            if now_seen != seen:
                seen, progressed = now_seen, now
            elif now - progressed > stall:
                say(f"no progress for {stall:.0f} s at {seen}/{count}")
                return False
            if now - reported >= 5:
                say(f"  receiver has {now_seen}/{count}")
                reported = now
            time.sleep(0.1)
        say(f"timed out at {seen}/{count}")
        return False

    def _dsn(self) -> str:
        assert self.postgres, "setup() starts it"
        return f"host=127.0.0.1 port={self.postgres.port} user=postgres dbname=homing"

    def sql_top(self, reset: bool = False, top: int = 4) -> list[dict[str, Any]]:
        """The statements that took the most database time since the last reset."""
        import psycopg

        with psycopg.connect(self._dsn(), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT calls, total_exec_time, rows, "
                "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'homing') "
                "ORDER BY total_exec_time DESC LIMIT %s",
                [top],
            ).fetchall()
            if reset:
                conn.execute("SELECT pg_stat_statements_reset()")
        return [
            {
                "calls": calls,
                "total_ms": round(total),
                "mean_ms": round(total / max(calls, 1), 3),
                "rows": n,
                "query": query[:160],
            }
            for calls, total, n, query in rows
        ]

    def report_sql(self, label: str) -> None:
        top = self.sql_top(reset=True)
        self.results.setdefault("sql_top", {})[label] = top
        print(f"  top SQL by database time [{label}]:", flush=True)
        for row in top:
            print(
                f"    {row['total_ms']:>7} ms  {row['calls']:>6} calls  {row['mean_ms']:>7} ms/call"
                f"  {row['query'][:110]}",
                flush=True,
            )

    def reset_backlog(self) -> int:
        """With the workers stopped: mark what is still undelivered as succeeded and drop
        the queued Celery messages, so the next measurement starts from nothing. Returns
        how many deliveries were still pending or delivering."""
        import psycopg
        import redis

        with psycopg.connect(self._dsn(), autocommit=True) as conn:
            cursor = conn.execute(
                "UPDATE deliveries_delivery SET status = 'succeeded', next_attempt_at = NULL, "
                "lease_expires_at = NULL, blocked_by = NULL "
                "WHERE status IN ('pending', 'held', 'delivering')"
            )
            leftover = cursor.rowcount
        assert self.redis, "setup() starts it"
        client = redis.Redis.from_url(self.redis.url, socket_timeout=10)
        client.delete("celery", "unacked", "unacked_index")
        client.close()
        if leftover:
            say(f"  cleared {leftover} deliveries left undelivered and the queued messages")
        return leftover

    def create_tenant(self, name: str) -> tuple[str, dict[str, str]]:
        """A tenant of its own: its API key and the headers that authenticate as it."""
        api_key = self.manage("create_tenant", name).strip().splitlines()[-1]
        return api_key, {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}

    def create_endpoint(self, auth: dict[str, str], /, **fields: Any) -> dict[str, Any]:
        """POST /api/v1/endpoints as the tenant `auth` belongs to; its secret is kept so
        the received samples can be verified. (`auth` positional only: an endpoint has an
        `auth` field too.)"""
        status, data = self.http(self.web_port, "POST", "/api/v1/endpoints", fields, auth)
        if status != 201:
            raise BenchError(f"creating an endpoint answered {status}: {data[:300]!r}")
        endpoint = json.loads(data)
        self.endpoint_secrets.append(endpoint["secret"])
        return endpoint

    def dump(self) -> dict[str, Any]:
        return json.loads(self.receiver("GET", "/_dump"))

    # --- set-up ------------------------------------------------------------------------

    def setup(self) -> None:
        bindir, redis_binary = ensure_binaries()
        user = server_user()
        self.postgres = postgres = Postgres(bindir, self.workdir, user)
        self.redis = redis_server = Redis(redis_binary, self.workdir)
        say(
            f"starting PostgreSQL on 127.0.0.1:{postgres.port} and Redis on "
            f"127.0.0.1:{redis_server.port} (workdir {self.workdir})"
        )
        postgres.start()
        # pg_stat_statements (PostgreSQL contrib) says which SQL the database's CPU goes to.
        with open(postgres.datadir / "postgresql.conf", "a") as conf:
            conf.write("shared_preload_libraries = 'pg_stat_statements'\n")
        postgres.pg_ctl("restart")
        redis_server.start()
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres",
            autocommit=True,
        ) as conn:
            conn.execute("CREATE DATABASE homing")
        with psycopg.connect(self._dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        self.env = {
            **os.environ,
            "DATABASE_URL": postgres.url,
            "REDIS_URL": redis_server.url,
            "SECRET_KEY": "homing-bench-secret-not-for-production",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "HOMING_ALLOW_PRIVATE_NETWORKS": "true",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
        self.env.pop("DEBUG", None)
        say("migrating a fresh database")
        self.manage("migrate", "--noinput")
        self.api_key, self.auth = self.create_tenant("bench")
        # The second port is another "host" for the senders' per-host pools (steps_flow).
        self.receiver_port = self.other_host_port = free_port()
        while self.other_host_port == self.receiver_port:
            self.other_host_port = free_port()
        self.receiver_proc = self.start(
            "receiver",
            [
                sys.executable,
                "-m",
                "bench.receiver",
                str(self.receiver_port),
                str(self.other_host_port),
            ],
        )
        wait_for_port(self.receiver_port, "the receiver")
        wait_for_port(self.other_host_port, "the receiver")
        pg_pid = int((postgres.datadir / "postmaster.pid").read_text().split()[0])
        assert redis_server.process, "started above"
        self.cpu_pids = {"postgres": pg_pid, "redis": redis_server.process.pid}
        self.cpu_pids["receiver"] = self.receiver_proc.pid

    def teardown(self) -> None:
        say("stopping everything this run started")
        for process in reversed(self.started):
            with contextlib.suppress(Exception):
                process.stop()
        if self.redis:
            with contextlib.suppress(Exception):
                self.redis.stop()
        if self.postgres and self.postgres.datadir.exists():
            with contextlib.suppress(Exception):
                self.postgres.pg_ctl("stop")
        if self.args.keep:
            say(f"kept logs and data in {self.workdir}")
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
