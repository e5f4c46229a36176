"""Bench steps on the web side: the gunicorn and delivery ceilings, the web process
and the closed-loop ingestion of the Python client."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from bench import ceilings, load, procs
from bench.report import fmt_cpu as _fmt_cpu
from bench.stack import EVENT_TYPE, event_body, say
from deliveries.transport.signing import payload_bytes, sign

if TYPE_CHECKING:
    from bench.measure import Measure as _Base  # mixed into bench.run.Bench with it
else:
    _Base = object

# As the worker process (HOMING_SEND_CONCURRENCY default).
SEND_CONCURRENCY = 400


class WebSteps(_Base):
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
        for k in range(self.args.endpoints):
            # One endpoint: it takes every event. K endpoints: each takes 1/K of the
            # types, so every event still has exactly one delivery.
            types = [] if self.args.endpoints == 1 else [f"{EVENT_TYPE}.{k}"]
            self.create_endpoint(
                self.auth,
                url=f"http://127.0.0.1:{self.receiver_port}/hook/{k}",
                description=f"bench {k}",
                event_types=types,
            )
        self.endpoint_secret = self.endpoint_secrets[0]

    def aiohttp_ceiling(self) -> None:
        """A plain aiohttp client posting to the same receiver, one process, as many in
        flight as a worker process: what the worker's drain is quoted against."""
        url = f"http://127.0.0.1:{self.receiver_port}/hook"
        seconds = 3 if self.args.quick else 5
        rate = ceilings.aiohttp_ceiling(url, seconds=seconds, concurrency=SEND_CONCURRENCY)
        # The same on uvloop, the worker's loop: what the client itself could do there.
        on_uvloop = ceilings.aiohttp_ceiling(
            url, seconds=seconds, concurrency=SEND_CONCURRENCY, loop="uvloop"
        )
        self.receiver("POST", "/_reset")
        self.results["aiohttp_ceiling"] = {
            "rate": round(rate),
            "rate_on_uvloop": round(on_uvloop),
            "concurrency": SEND_CONCURRENCY,
        }
        say(
            f"aiohttp ceiling: {rate:.0f} POSTs/s on asyncio's loop, {on_uvloop:.0f} on uvloop"
            f" ({SEND_CONCURRENCY} in flight, one process)"
        )

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
