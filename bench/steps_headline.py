"""The figures a user cares about, each with its ceiling measured in the same run.

Load comes from `wrk` (bench/wrk.py), whose own CPU is reported next to every figure
so it is visibly not the limit:
- the gunicorn ceiling: the same gunicorn serving a trivial WSGI app, under wrk;
- isolated ingestion (no worker running), single POSTs and batches of 100: events/s,
  p50/p99 per request, web CPU per event, and the share of that ceiling;
- ingestion latency at a steady 200 events/s (paced, open loop);
- live end to end (workers running) with single POSTs and with batches of 100:
  deliveries/s from the first POST to the last receipt, and as a share of the
  backlog-drain rate measured earlier in the run.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import psycopg

from bench import load, procs, wrk
from bench.report import fmt_cpu
from bench.stack import BenchError, event_body, say

if TYPE_CHECKING:
    from bench.steps_delivery import DeliverySteps as _Base  # in bench.run.Bench: warm_up()
else:
    _Base = object

BATCH = 100
MAX_TAIL_SECONDS = 150  # the longest wait for a live step's last receipt


class HeadlineSteps(_Base):
    def wrk_ceiling(self) -> None:
        hello, port = self.start_gunicorn("gunicorn-hello-wrk", "bench.hello_wsgi:app")
        try:
            self.wait_http(port, "/", hello)
            result = wrk.get(port=port, path="/", seconds=self.args.wrk_seconds, connections=16)
        finally:
            self.stop(hello)
        self.results["gunicorn_hello_wrk"] = result.figures()
        say(
            f"gunicorn ceiling under wrk (trivial WSGI app): {result.rate:.0f} req/s, "
            f"wrk {result.figures()['load_generator_cpu_percent']}% CPU"
        )

    def ingest_isolated(self, batch: int) -> None:
        """No worker running: how fast the web process takes events in."""
        label = f"batch{batch}" if batch else "single"
        path = "/api/v1/events/batch" if batch else "/api/v1/events"
        connections = self.args.wrk_batch_connections if batch else self.args.wrk_connections
        wrk.run(  # warm every web thread's connection and code path
            port=self.web_port,
            path=path,
            api_key=self.api_key,
            seconds=1,
            connections=4,
            batch=batch,
        )
        spy, profile = None, f"profile-ingest-{label}-gunicorn.txt"
        if self.args.profile:
            spy = self._spy(self.web.pid, self.args.wrk_seconds, profile, True, gil=True)
        cpu0, workers0 = self._snap(self.cpu_pids), procs.children_cpu(self.web.pid)
        result = wrk.run(
            port=self.web_port,
            path=path,
            api_key=self.api_key,
            seconds=self.args.wrk_seconds,
            connections=connections,
            batch=batch,
        )
        cpu = self._cpu_delta(cpu0, result.seconds, result.client_cpu_seconds)
        # wrk's keep-alive connections stay on the gunicorn worker that accepted them:
        # when most land on one, it is bound by its GIL and the figure drops by half.
        web_workers = procs.shares(workers0, procs.children_cpu(self.web.pid), result.seconds)
        if spy:
            self._spy_report(spy, profile, "gunicorn")
        figures: dict[str, Any] = {**result.figures(), "connections": connections}
        figures["cpu_percent_of_one_core"] = cpu
        figures["gunicorn_workers_cpu_percent"] = web_workers
        figures["web_cpu_ms_per_event"] = round(
            10 * cpu.get("gunicorn", 0) / max(result.events_rate, 1e-9), 3
        )
        ceiling = self.results.get("gunicorn_hello_wrk", {}).get("rate")
        if ceiling:
            # Events (not requests) against the trivial app's requests: what a user gets.
            figures["share_of_gunicorn_ceiling"] = round(result.events_rate / ceiling, 4)
        self.results.setdefault("ingestion_wrk", {})[label] = figures
        self.reset_backlog()  # what was accepted must not leak into the drain step
        say(
            f"ingestion isolated [{label}]: {result.events_rate:.0f} events/s "
            f"({result.rate:.0f} req/s, p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms, "
            f"{figures['web_cpu_ms_per_event']} ms web CPU/event; gunicorn workers "
            f"{'/'.join(f'{share:.0f}' for share in web_workers)}%); CPU %: {fmt_cpu(cpu)}"
        )

    def ingest_paced(self) -> None:
        """p50/p99 of POST /events at a steady rate well below the ceiling."""
        rate, seconds = self.args.paced_rate, self.args.paced_seconds
        result = load.paced(
            port=self.web_port,
            path="/api/v1/events",
            rate=rate,
            duration=seconds,
            headers=self.auth,
            body=event_body,
        )
        figures = self._load_figures(result, ok_status=202)
        figures["rate_offered"] = rate
        self.results["ingestion_paced"] = figures
        self.reset_backlog()
        say(
            f"ingestion at {rate:.0f} events/s (paced): p50 {figures['p50_ms']} ms, "
            f"p99 {figures['p99_ms']} ms, {figures['errors']} errors"
        )

    def live_wrk(self, running: list[procs.Managed], batch: int) -> list[procs.Managed]:
        """Workers running: POST for a while and time first POST -> last receipt."""
        label = f"batch{batch}" if batch else "single"
        workers = len([p for p in running if p.name.startswith("worker")])
        path = "/api/v1/events/batch" if batch else "/api/v1/events"
        connections = self.args.wrk_batch_connections if batch else self.args.wrk_connections
        self.receiver("POST", "/_reset")
        since = self._db_now()
        cpu_pids = {**self.cpu_pids, **{p.name: p.pid for p in running}}
        cpu0 = self._snap(cpu_pids)
        started = time.monotonic()
        result = wrk.run(
            port=self.web_port,
            path=path,
            api_key=self.api_key,
            seconds=self.args.wrk_seconds,
            connections=connections,
            batch=batch,
        )
        ids = self._settled_event_ids_since(since)
        drain = self.results.get("delivery_backlog", {}).get(f"{workers}w", {})
        drain_rate = drain.get("deliveries_per_s_first_to_last")
        complete = self.wait_received(len(ids), running, timeout=self._tail(len(ids), drain_rate))
        finished = time.monotonic()
        cpu = self._cpu_delta(cpu0, finished - started, result.client_cpu_seconds)
        dump = self.dump()
        check = self._check(dump["records"], ids)
        if not complete:
            say("  live run not complete within the cap: clearing what is left")
            self.stop(*running)
            check["left_undelivered_at_cap"] = self.reset_backlog()
            running = [*self.start_workers(workers), self.start_scheduler()]
            self.warm_up(running)
        last = max((t for _, t in dump["records"]), default=started)
        rate = check["unique_seen"] / (last - started) if last > started else 0.0
        figures = {
            "workers": workers,
            "complete": complete,
            **check,
            "deliveries_per_s": round(rate, 1),
            "ingestion": result.figures(),
            "share_of_backlog_drain": round(rate / drain_rate, 3) if drain_rate else None,
            "seconds_last_post_to_last_receipt": round(last - (started + result.seconds), 2),
            "cpu_percent_of_one_core": cpu,
        }
        self.results.setdefault("live_wrk", {})[label] = figures
        say(
            f"live end to end [{label}, {workers}w]: {rate:.0f} deliveries/s "
            f"(ingested {result.events_rate:.0f} events/s), duplicates {check['duplicates']}, "
            f"missing {check['missing']}; CPU %: {fmt_cpu(cpu)}"
        )
        return running

    def _tail(self, deliveries: int, drain_rate: float | None) -> float:
        """How long to wait for the last receipt: batches are accepted several times
        faster than they are delivered, so the wait scales with the backlog wrk left
        (half again what the backlog drain would take), so that every event is checked
        for loss and duplicates; at most MAX_TAIL_SECONDS."""
        if not drain_rate:
            return self.args.tail_seconds
        return min(MAX_TAIL_SECONDS, max(self.args.tail_seconds, 1.5 * deliveries / drain_rate))

    def _settled_event_ids_since(self, since: Any) -> set[str | None]:
        """The events accepted since `since`, read once the requests wrk left in flight
        when it stopped have committed (up to 8 batches: 800 events, which were counted
        as unexpected receipts and let the wait end before the last of these came)."""
        ids = self._event_ids_since(since)
        while True:
            time.sleep(0.5)
            again = self._event_ids_since(since)
            if again == ids:
                return ids
            ids = again

    def _db_now(self) -> Any:
        with psycopg.connect(self._dsn(), autocommit=True) as conn:
            row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        return row[0]

    def _event_ids_since(self, since: Any) -> set[str | None]:
        with psycopg.connect(self._dsn(), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT e.id FROM webhooks_event e JOIN deliveries_delivery d "
                "ON d.event_id = e.id WHERE e.created_at >= %s",
                [since],
            ).fetchall()
        if not rows:
            raise BenchError("wrk's events were not accepted (see the web log)")
        return {row[0] for row in rows}
