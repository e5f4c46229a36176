"""Homing end-to-end benchmark: `make bench` (full, ~4-6 min) or `make bench ARGS=--quick`.

Starts everything itself on loopback — throwaway PostgreSQL and Redis (tests/harness.py),
a migrated database, a tenant, gunicorn, Celery workers, the scheduler and a fast
receiver in its own process — measures, prints a table and one `BENCH_JSON {...}` line,
and stops everything it started, also on Ctrl-C or failure. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import load, procs
from bench import profile as pyspy
from deliveries.signing import payload_bytes, sign
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


class Bench:
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
        return f"host=127.0.0.1 port={self.postgres.port} user=postgres dbname=homing"  # type: ignore[union-attr]

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
                "lease_expires_at = NULL WHERE status IN ('pending', 'delivering')"
            )
            leftover = cursor.rowcount
        client = redis.Redis.from_url(self.redis.url, socket_timeout=10)  # type: ignore[union-attr]
        client.delete("celery", "unacked", "unacked_index")
        client.close()
        if leftover:
            say(f"  cleared {leftover} deliveries left undelivered and the queued messages")
        return leftover

    def dump(self) -> dict[str, Any]:
        return json.loads(self.receiver("GET", "/_dump"))

    # --- set-up ------------------------------------------------------------------------

    def setup(self) -> None:
        bindir, redis_binary = ensure_binaries()
        user = server_user()
        self.postgres, self.redis = (
            Postgres(bindir, self.workdir, user),
            Redis(redis_binary, self.workdir),
        )
        say(
            f"starting PostgreSQL on 127.0.0.1:{self.postgres.port} and Redis on "
            f"127.0.0.1:{self.redis.port} (workdir {self.workdir})"
        )
        self.postgres.start()
        # pg_stat_statements (PostgreSQL contrib) says which SQL the database's CPU goes to.
        with open(self.postgres.datadir / "postgresql.conf", "a") as conf:
            conf.write("shared_preload_libraries = 'pg_stat_statements'\n")
        self.postgres.pg_ctl("restart")
        self.redis.start()
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.postgres.port} user=postgres dbname=postgres",
            autocommit=True,
        ) as conn:
            conn.execute("CREATE DATABASE homing")
        with psycopg.connect(self._dsn(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        self.env = {
            **os.environ,
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.redis.url,
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
        self.api_key = self.manage("create_tenant", "bench").strip().splitlines()[-1]
        self.auth = {"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"}
        self.receiver_port = free_port()
        self.receiver_proc = self.start(
            "receiver", [sys.executable, "-m", "bench.receiver", str(self.receiver_port)]
        )
        wait_for_port(self.receiver_port, "the receiver")
        pg_pid = int((self.postgres.datadir / "postmaster.pid").read_text().split()[0])
        self.cpu_pids = {"postgres": pg_pid, "redis": self.redis.process.pid}  # type: ignore[union-attr]
        self.cpu_pids["receiver"] = self.receiver_proc.pid

    # --- measurements ------------------------------------------------------------------

    def gunicorn_ceilings(self) -> None:
        n, clients = self.args.ceiling_requests, self.args.clients
        hello, port = self.start_gunicorn("gunicorn-hello", "bench.hello_wsgi:app")
        try:
            self.wait_http(port, "/", hello)
            load.closed_loop(
                port=port, method="GET", path="/", clients=clients, total=200, headers={}
            )
            result = load.closed_loop(
                port=port, method="GET", path="/", clients=clients, total=n, headers={}
            )
        finally:
            self.stop(hello)
        self.results["gunicorn_hello"] = self._load_figures(result)
        say(
            f"gunicorn ceiling (trivial WSGI app, {self.args.web_workers} workers x "
            f"{self.args.web_threads} threads, "
            f"{clients} clients): {result.rate:.0f} req/s, p50 {result.percentile(50) * 1e3:.1f} ms"
        )

    def start_web(self) -> None:
        self.web, self.web_port = self.start_gunicorn("gunicorn", "config.wsgi")
        self.cpu_pids["gunicorn"] = self.web.pid
        self.wait_http(self.web_port, "/healthz", self.web)
        # Load Django in every web worker before measuring.
        load.closed_loop(
            port=self.web_port,
            method="GET",
            path="/api/v1/endpoints",
            clients=self.args.web_workers * 2,
            total=50,
            headers=self.auth,
        )
        n = self.args.ceiling_requests
        result = load.closed_loop(
            port=self.web_port,
            method="GET",
            path="/api/v1/no-such-route",  # Django + middleware, no database
            clients=self.args.clients,
            total=n,
            headers={},
        )
        self.results["django_trivial"] = self._load_figures(result, ok_status=404)
        say(
            f"Django trivial route (JSON 404, no database): "
            f"{self.results['django_trivial']['rate']:.0f} req/s"
        )
        self.endpoint_secrets: list[str] = []
        for k in range(self.args.endpoints):
            # One endpoint: it takes every event. K endpoints: each takes 1/K of the
            # types, so every event still has exactly one delivery.
            types = [] if self.args.endpoints == 1 else [f"{EVENT_TYPE}.{k}"]
            status, data = self.http(
                self.web_port,
                "POST",
                "/api/v1/endpoints",
                {
                    "url": f"http://127.0.0.1:{self.receiver_port}/hook/{k}",
                    "description": f"bench {k}",
                    "event_types": types,
                },
                self.auth,
            )
            if status != 201:
                raise BenchError(f"creating an endpoint answered {status}: {data[:300]!r}")
            self.endpoint_secrets.append(json.loads(data)["secret"])
        self.endpoint_secret = self.endpoint_secrets[0]

    def raw_ceiling(self) -> None:
        secret = self.endpoint_secret
        data = json.loads(event_body(0))["data"]

        def request(i: int) -> tuple[bytes, dict[str, str]]:
            msg_id = f"evt_raw{i:020d}"
            ts = int(time.time())
            body = payload_bytes(
                event_id=msg_id,
                event_type=EVENT_TYPE,
                timestamp_iso="2025-01-01T00:00:00.000000Z",
                data=data,
            )
            return body, {
                "Content-Type": "application/json",
                "User-Agent": "Homing/bench",
                "webhook-id": msg_id,
                "webhook-timestamp": str(ts),
                "webhook-signature": sign(msg_id=msg_id, timestamp=ts, body=body, secrets=[secret]),
            }

        threads, n = self.args.raw_threads, self.args.raw_requests
        bodies = [request(i) for i in range(n + threads * 2)]  # prepared: time only the POSTs
        self.receiver("POST", "/_reset")
        cpu0 = procs.cpu_snapshot({"receiver": self.receiver_proc.pid})["receiver"]
        rate, client_us = load.raw_ceiling(
            port=self.receiver_port,
            path="/hook",
            threads=threads,
            total=n,
            request=lambda i: bodies[i],
        )
        receiver_cpu = procs.cpu_snapshot({"receiver": self.receiver_proc.pid})["receiver"] - cpu0
        seen = self.received_count()
        self.receiver("POST", "/_reset")
        self.results["raw_ceiling"] = {
            "rate": round(rate),
            "threads": threads,
            "requests": n,
            "client_cpu_us_per_request": round(client_us),
            "receiver_cpu_us_per_request": round(receiver_cpu / max(seen, 1) * 1e6),
        }
        say(
            f"raw ceiling (urllib3, {threads} threads, keep-alive -> receiver): {rate:.0f} req/s; "
            f"client {client_us:.0f} µs CPU/req, receiver "
            f"{self.results['raw_ceiling']['receiver_cpu_us_per_request']} µs CPU/req"
        )

    def ingest(self, label: str, clients: int, profile_web: bool = False) -> load.LoadResult:
        n = self.args.events
        spy = None
        if profile_web:
            spy = self._spy(self.web.pid, 10, f"profile-{label}-gunicorn.txt", True, gil=True)
        cpu0 = self._snap(self.cpu_pids)
        result = load.closed_loop(
            port=self.web_port,
            method="POST",
            path="/api/v1/events",
            clients=clients,
            total=n,
            headers=self.auth,
            body=event_body,
            want_id=True,
            progress=lambda done: (
                say(f"  {done}/{n} events accepted") if done % max(1000, n // 4) == 0 else None
            ),
            seconds=self.args.ingest_seconds,
        )
        cpu = self._cpu_delta(cpu0, result.wall, result.client_cpu)
        figures = self._load_figures(result, ok_status=202)
        figures["cpu_percent_of_one_core"] = cpu
        self.results.setdefault("ingestion", {})[label] = figures
        if len(result.samples) + result.errors < n:
            say(
                f"  stopped at the {self.args.ingest_seconds:.0f} s cap: "
                f"{len(result.samples)} of {n} events sent"
            )
        if len(result.ok) != len(result.samples) or result.errors:
            say(
                f"  WARNING: {result.errors} errors, {len(result.samples) - len(result.ok)} non-202"
            )
        say(
            f"ingestion [{label}]: {result.rate:.0f} events/s, p50 "
            f"{figures['p50_ms']} ms, p99 {figures['p99_ms']} ms ({clients} clients); "
            f"CPU %: {_fmt_cpu(cpu)}"
        )
        if spy:
            self._spy_report(spy, f"profile-{label}-gunicorn.txt", "gunicorn")
        return result

    def backlog(self, workers: int, profile: bool) -> None:
        """Ingest N events with no worker running (isolated ingestion), then start the
        workers and the scheduler and time how fast the backlog reaches the receiver."""
        label = f"{workers}w"
        n = self.args.events
        self.receiver("POST", "/_reset")
        say(f"backlog run, {workers} worker process(es): ingesting {n} events, no worker running")
        accepted = self.ingest(f"isolated-before-{label}", self.args.clients, profile)
        ids = {s.event_id for s in accepted.ok}
        self.report_sql(f"ingest-{label}")
        say(f"starting {workers} worker(s) x {self.args.concurrency} threads + 1 scheduler")
        launched = time.monotonic()
        running = [*self.start_workers(workers), self.start_scheduler()]
        pids = {p.name: p.pid for p in running}
        cpu_pids = {**self.cpu_pids, **pids}
        cpu0 = self._snap(cpu_pids)
        spy = None
        try:
            with procs.RssSampler(pids) as sampler:
                if profile:
                    time.sleep(3)  # past the import, into the sending
                    spy = self._spy(
                        running[0].pid, 8, f"profile-{label}-worker1.txt", True, gil=True
                    )
                complete = self.wait_received(len(ids), running, timeout=self.args.drain_seconds)
                finished = time.monotonic()
                time.sleep(1.0)  # let any late duplicate arrive
            cpu = self._cpu_delta(cpu0, finished - launched)
            if spy:
                self._spy_report(spy, f"profile-{label}-worker1.txt", "worker")
        finally:
            self.stop(*running)
        self.report_sql(f"drain-{label}")
        dump = self.dump()
        leftover = self.reset_backlog()
        check = self._check(dump["records"], ids)
        times = [t for _, t in dump["records"]] or [launched]
        first, last = min(times), max(times)
        figures = {
            "workers": workers,
            "threads_per_worker": self.args.concurrency,
            "complete": complete,
            "left_undelivered_at_cap": leftover,
            **check,
            "deliveries_per_s_first_to_last": round(check["unique_seen"] / (last - first), 1)
            if last > first
            else None,
            "deliveries_per_s_from_launch": round(check["unique_seen"] / (last - launched), 1),
            "seconds_launch_to_first": round(first - launched, 2),
            "seconds_first_to_last": round(last - first, 2),
            "rss": sampler.summary(running_from=first),
            "cpu_percent_of_one_core": cpu,
        }
        figures["ratio_to_raw_ceiling"] = round(
            (figures["deliveries_per_s_first_to_last"] or 0) / self.results["raw_ceiling"]["rate"],
            3,
        )
        self.results.setdefault("delivery_backlog", {})[label] = figures
        self._verify_samples(dump["samples"])
        say(
            f"backlog drain [{label}]: {figures['deliveries_per_s_first_to_last']} deliveries/s "
            f"(first->last receipt; {figures['deliveries_per_s_from_launch']}/s from process "
            f"launch), duplicates {check['duplicates']}, missing {check['missing']}; "
            f"CPU %: {_fmt_cpu(cpu)}"
        )

    def live(self, workers: int) -> list[procs.Managed]:
        """Workers and scheduler running: ingest N events and time first accept -> last
        receipt (ingestion and delivery share the CPU). Leaves the processes running."""
        label = f"{workers}w"
        say(f"live run: starting {workers} worker(s) + 1 scheduler, warming up")
        running = [*self.start_workers(workers), self.start_scheduler()]
        self.receiver("POST", "/_reset")
        warm = load.closed_loop(
            port=self.web_port,
            method="POST",
            path="/api/v1/events",
            clients=2,
            total=20,
            headers=self.auth,
            body=event_body,
        )
        if not self.wait_received(len(warm.ok), running, timeout=60):
            raise BenchError("the workers did not deliver the warm-up events")
        self.receiver("POST", "/_reset")
        pids = {p.name: p.pid for p in running}
        cpu_pids = {**self.cpu_pids, **pids}
        cpu0 = self._snap(cpu_pids)
        n = self.args.events
        self.sql_top(reset=True)
        say(f"live run [{label}]: ingesting {n} events while delivering")
        with procs.RssSampler(pids) as sampler:
            started = time.monotonic()
            accepted = self.ingest(f"live-{label}", self.args.clients)
            ids = {s.event_id for s in accepted.ok}
            complete = self.wait_received(len(ids), running, timeout=self.args.tail_seconds)
            finished = time.monotonic()
            time.sleep(1.0)
        cpu = self._cpu_delta(cpu0, finished - started)
        self.report_sql(f"live-{label}")
        dump = self.dump()
        check = self._check(dump["records"], ids)
        if not complete:
            say(
                "  live run not complete within the cap: clearing what is left before the next step"
            )
            self.stop(*running)
            check["left_undelivered_at_cap"] = self.reset_backlog()
            running = [*self.start_workers(workers), self.start_scheduler()]
            time.sleep(4)
        last = max(t for _, t in dump["records"])
        first_accept = accepted.first_done
        elapsed = last - first_accept
        backlog_at_end = sum(1 for _, t in dump["records"] if t > accepted.last_done)
        figures = {
            "workers": workers,
            "complete": complete,
            **check,
            "deliveries_per_s_first_accept_to_last_receipt": round(
                check["unique_seen"] / elapsed, 1
            ),
            "ingestion_rate": round(accepted.rate, 1),
            "delivered_after_last_accept": backlog_at_end,
            "seconds_last_accept_to_last_receipt": round(last - accepted.last_done, 2),
            "rss": sampler.summary(running_from=first_accept),
            "cpu_percent_of_one_core": cpu,
        }
        self.results.setdefault("delivery_live", {})[label] = figures
        say(
            f"live [{label}]: {figures['deliveries_per_s_first_accept_to_last_receipt']} "
            f"deliveries/s end to end (ingestion {accepted.rate:.0f}/s; the last receipt came "
            f"{figures['seconds_last_accept_to_last_receipt']} s after the last accept), "
            f"duplicates {check['duplicates']}, missing {check['missing']}"
        )
        return running

    def latency(self, running: list[procs.Managed]) -> None:
        rate, seconds = self.args.rate, self.args.latency_seconds
        self.receiver("POST", "/_reset")
        say(f"latency: {rate:.0f} events/s for {seconds:.0f} s (paced), workers running")
        result = load.paced(
            port=self.web_port,
            path="/api/v1/events",
            rate=rate,
            duration=seconds,
            headers=self.auth,
            body=event_body,
        )
        ids = {s.event_id: s.done_at for s in result.ok}
        self.wait_received(len(ids), running, timeout=60)
        time.sleep(0.5)
        dump = self.dump()
        seen: dict[str, float] = {}
        for webhook_id, at in dump["records"]:
            seen.setdefault(webhook_id, at)
        lat = [seen[i] - t for i, t in ids.items() if i in seen]
        check = self._check(dump["records"], set(ids))
        figures = {
            "rate_offered": rate,
            "seconds": seconds,
            "events": len(ids),
            "achieved_rate": round(len(result.ok) / result.wall, 1),
            "late_starts": result.late_starts,
            "api_p50_ms": round(result.percentile(50) * 1e3, 1),
            "api_p99_ms": round(result.percentile(99) * 1e3, 1),
            "p50_ms": round(load.percentile(lat, 50) * 1e3, 1),
            "p99_ms": round(load.percentile(lat, 99) * 1e3, 1),
            "max_ms": round(max(lat) * 1e3, 1) if lat else None,
            "min_ms": round(min(lat) * 1e3, 1) if lat else None,
            "workers": len([p for p in running if p.name.startswith("worker")]),
            **check,
        }
        self.results["latency"] = figures
        say(
            f"latency 202 -> receiver: p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms, "
            f"max {figures['max_ms']} ms ({len(lat)} events; API p50 {figures['api_p50_ms']} ms)"
        )

    # --- helpers -----------------------------------------------------------------------

    def _check(self, records: list[list[Any]], ids: set[str | None]) -> dict[str, int]:
        counts = Counter(webhook_id for webhook_id, _ in records)
        return {
            "accepted": len(ids),
            "received": len(records),
            "unique_seen": len(set(counts) & ids),
            "duplicates": sum(c - 1 for i, c in counts.items() if c > 1),
            "missing": len(ids - set(counts)),
            "unexpected": len(set(counts) - ids),
        }

    def _verify_samples(self, samples: list[dict[str, Any]]) -> None:
        from homing_receiver import Webhook

        for sample in samples:
            errors = []
            for secret in self.endpoint_secrets:
                try:
                    Webhook(secret).verify(sample["body"], sample["headers"])
                    break
                except Exception as exc:  # another endpoint's secret
                    errors.append(exc)
            else:
                raise BenchError(f"a received webhook failed verification: {errors[0]}")
        self.results["signatures_verified"] = self.results.get("signatures_verified", 0) + len(
            samples
        )

    def _load_figures(
        self, result: load.LoadResult, ok_status: int | None = None
    ) -> dict[str, Any]:
        good = [s for s in result.samples if s.status == ok_status] if ok_status else result.ok
        lat = [s.latency for s in good]
        return {
            "requests": len(result.samples) + result.errors,
            "ok": len(good),
            "errors": result.errors + len(result.samples) - len(good),
            "rate": round(len(good) / result.wall, 1) if result.wall else 0,
            "p50_ms": round(load.percentile(lat, 50) * 1e3, 1),
            "p99_ms": round(load.percentile(lat, 99) * 1e3, 1),
            "max_ms": round(max(lat) * 1e3, 1) if lat else None,
            "clients": self.args.clients,
            "load_generator_cpu_percent": round(100 * result.client_cpu / result.wall, 1)
            if result.wall
            else None,
        }

    def _snap(self, pids: dict[str, int]) -> dict[str, float]:
        return {**procs.cpu_snapshot(pids), "_system": procs.system_busy()}

    def _cpu_delta(
        self, before: dict[str, float], wall: float, bench_cpu: float | None = None
    ) -> dict[str, float]:
        by_name = {process.name: process.pid for process in self.started}
        pids = {name: self.cpu_pids.get(name) or by_name.get(name) for name in before}
        after = self._snap({k: v for k, v in pids.items() if v})
        cpu = {
            name: round(100 * (after.get(name, before[name]) - before[name]) / wall, 1)
            for name in before
        }
        if bench_cpu is not None:
            cpu["load-generator"] = round(100 * bench_cpu / wall, 1)
        # Everything else on the machine (e.g. someone's test suite): the figures above
        # are only comparable between runs when this stays near zero.
        machine = cpu.pop("_system")
        cpu["OTHER-processes"] = round(max(0.0, machine - sum(cpu.values())), 1)
        return cpu

    def _spy(
        self, pid: int, seconds: float, name: str, subprocesses: bool = False, gil: bool = False
    ):
        if not pyspy.py_spy():
            say("--profile: py-spy is not installed (.venv/bin/pip install py-spy); skipping")
            return None
        say(f"  py-spy recording pid {pid} for {max(1, int(seconds))} s -> {name}")
        return pyspy.start(pid, seconds, self.profile_dir / name, subprocesses, gil)

    def _spy_report(self, spy, name: str, what: str) -> None:
        try:
            spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()
        summary = pyspy.summarise(self.profile_dir / name)
        self.results.setdefault("profiles", {})[name] = str(self.profile_dir / name)
        print(f"py-spy profile of the {what} ({self.profile_dir / name}):\n{summary}", flush=True)

    # --- the run -----------------------------------------------------------------------

    def run(self) -> None:
        self.profile_dir = Path(self.args.profile_dir)
        if self.args.profile:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        busy0 = procs.system_busy()
        time.sleep(1)
        idle_busy = 100 * (procs.system_busy() - busy0)
        self.results["machine_busy_percent_before_start"] = round(idle_busy, 1)
        say(
            f"{os.cpu_count()} CPUs; before starting anything the machine was {idle_busy:.0f}% busy"
        )
        self.setup()
        self.gunicorn_ceilings()
        self.start_web()
        self.raw_ceiling()
        for i, workers in enumerate(self.args.workers):
            self.backlog(workers, profile=self.args.profile and i == len(self.args.workers) - 1)
        running = self.live(max(self.args.workers))
        try:
            self.latency(running)
        finally:
            self.stop(*running)
        self.results["seconds_total"] = round(time.monotonic() - t0, 1)
        print_table(self.results)
        print("BENCH_JSON " + json.dumps(self.results, separators=(",", ":")), flush=True)

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


def _fmt_cpu(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))


def print_table(r: dict[str, Any]) -> None:
    rows: list[tuple[str, str, str]] = []

    def add(name: str, value: str, target: str = "") -> None:
        rows.append((name, value, target))

    for label, f in r.get("ingestion", {}).items():
        flowing = "deliveries flowing" if label.startswith("live") else "no worker running"
        add(
            f"Ingestion POST /api/v1/events [{label}, {flowing}]",
            f"{f['rate']:.0f} ev/s  p50 {f['p50_ms']} ms  p99 {f['p99_ms']} ms",
            ">= 400 ev/s",
        )
    hello, django = r["gunicorn_hello"], r["django_trivial"]
    iso = next((f for k, f in r.get("ingestion", {}).items() if k.startswith("isolated")), None)
    add("gunicorn ceiling (trivial WSGI app)", f"{hello['rate']:.0f} req/s")
    add("Django trivial route (JSON 404, no DB)", f"{django['rate']:.0f} req/s")
    if iso:
        share, of_django = iso["rate"] / hello["rate"], iso["rate"] / django["rate"]
        add("Ingestion / gunicorn ceiling", f"{share:.1%} (of Django route: {of_django:.1%})")
    raw = r["raw_ceiling"]["rate"]
    add("Raw ceiling: urllib3 16 thr -> receiver", f"{raw} req/s")
    for label, f in r.get("delivery_backlog", {}).items():
        add(
            f"Delivery, backlog drain [{label}]",
            f"{f['deliveries_per_s_first_to_last']} del/s ({f['ratio_to_raw_ceiling']:.0%} of raw)"
            f"  {f['unique_seen']}/{f['accepted']} in {f['seconds_first_to_last']} s"
            f"{'' if f['complete'] else ' (time cap hit)'}  dup {f['duplicates']}",
            ">= 1000/s, >= 50%",
        )
    for label, f in r.get("delivery_live", {}).items():
        tail = f["seconds_last_accept_to_last_receipt"]
        add(
            f"Delivery, live end to end [{label}]",
            f"{f['deliveries_per_s_first_accept_to_last_receipt']} del/s "
            f"(ingest {f['ingestion_rate']:.0f}/s; tail {tail} s)"
            f"{'' if f['complete'] else ' (time cap hit)'}"
            f"  dup {f['duplicates']} missing {f['missing']}",
        )
    lat = r.get("latency")
    if lat:
        add(
            f"Latency 202->receiver @ {lat['rate_offered']:.0f} ev/s [{lat['workers']}w]",
            f"p50 {lat['p50_ms']} ms  p99 {lat['p99_ms']} ms  max {lat['max_ms']} ms"
            f"  (API kept up with {lat['achieved_rate']:.0f} ev/s; API p50 {lat['api_p50_ms']} ms)",
            "p50 < 50, p99 < 500",
        )
    for kind in ("delivery_backlog", "delivery_live"):
        for label, f in r.get(kind, {}).items():
            mem = "  ".join(
                f"{name} {m['start_mb']:.0f}->{m['peak_mb']:.0f}" for name, m in f["rss"].items()
            )
            add(f"RSS MiB start->peak [{kind.split('_')[1]} {label}]", mem)
    other = []
    phases = [(f"ingest[{k}]", f) for k, f in r.get("ingestion", {}).items()]
    for kind in ("delivery_backlog", "delivery_live"):
        phases += [(f"{kind.split('_')[1]}[{k}]", f) for k, f in r.get(kind, {}).items()]
    for name, f in phases:
        other.append(f"{name} {f['cpu_percent_of_one_core'].get('OTHER-processes', 0):.0f}")
    add("CPU % used by OTHER processes on the box", ", ".join(other), "~0 for clean figures")
    width = max(len(name) for name, _, _ in rows)
    vwidth = max(len(value) for _, value, _ in rows)
    print()
    print(f"{'measure':<{width}}  {'result':<{vwidth}}  target")
    print("-" * (width + vwidth + 24))
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:<{vwidth}}  {target}")
    print()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Homing end-to-end benchmark")
    parser.add_argument("--quick", action="store_true", help="smaller counts (~1 min)")
    parser.add_argument("--events", type=int, help="events per throughput run (10000; quick 2000)")
    parser.add_argument(
        "--workers",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 2],
        help="worker process counts to try, e.g. 1,2",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="threads per Celery worker")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument(
        "--web-threads", type=int, default=4, help="threads per gunicorn worker (as the Procfile)"
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent API clients")
    parser.add_argument(
        "--endpoints",
        type=int,
        default=1,
        help="endpoints, each matching 1/K of the events (default 1)",
    )
    parser.add_argument("--rate", type=float, default=100, help="events/s in the latency run")
    parser.add_argument("--latency-seconds", type=float, help="latency run length (20; quick 10)")
    parser.add_argument("--profile", action="store_true", help="py-spy the web and worker")
    parser.add_argument("--profile-dir", default="/tmp/homing-bench-profiles")
    parser.add_argument("--keep", action="store_true", help="keep logs and data directory")
    args = parser.parse_args(argv)
    args.events = args.events or (2000 if args.quick else 10000)
    args.latency_seconds = args.latency_seconds or (10 if args.quick else 20)
    args.ceiling_requests = 2000 if args.quick else 6000
    args.raw_requests = 5000 if args.quick else 20000
    args.raw_threads = 16
    # Caps that keep a run inside its time budget however slow the platform is; a run
    # that hits one reports what it did in the time (and says so).
    args.ingest_seconds = 15 if args.quick else 45
    args.drain_seconds = 20 if args.quick else 60
    args.tail_seconds = 15 if args.quick else 30
    if args.quick and args.workers == [1, 2]:
        args.workers = [2]
    if args.profile and args.quick:
        args.ingest_seconds = 20  # the web profile samples 10 s of it
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    global ENDPOINTS
    ENDPOINTS = args.endpoints

    def terminate(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    bench = Bench(args)
    try:
        bench.run()
        return 0
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except BenchError as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        bench.teardown()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
