"""Bench steps on the delivery side: backlog drain, live end to end (Python client)
and the 202 -> receiver latency."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bench import load, procs
from bench.report import fmt_cpu as _fmt_cpu
from bench.stack import BenchError, event_body, say

if TYPE_CHECKING:
    from bench.steps_web import WebSteps as _Base  # mixed into bench.run.Bench: its ingest()
else:
    _Base = object


class DeliverySteps(_Base):
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
                # The workers' CPU from their first delivery on: their start (Django,
                # imports, connections) left out, so it divides by what they sent.
                sending = self._first_receipt(running)
                if profile:
                    time.sleep(3)  # past the import, into the sending
                    spy = self._spy(
                        running[0].pid, 8, f"profile-{label}-worker1.txt", True, gil=True
                    )
                complete = self.wait_received(len(ids), running, timeout=self.args.drain_seconds)
                finished = time.monotonic()
                time.sleep(1.0)  # let any late duplicate arrive
            cpu = self._cpu_delta(cpu0, finished - launched)
            per_delivery = self._worker_cpu_per_delivery(sending, len(ids))
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
            "worker_cpu_ms_per_delivery": per_delivery,
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
            f"CPU %: {_fmt_cpu(cpu)}; workers' CPU {per_delivery} ms per delivery"
        )

    def _first_receipt(self, running: list[procs.Managed]) -> tuple[dict[str, float], int]:
        """Once the receiver has its first webhook: the workers' CPU seconds so far and
        how many webhooks it has."""
        workers = {p.name: p.pid for p in running if p.name.startswith("worker")}
        deadline = time.monotonic() + 60
        while self.received_count() == 0 and time.monotonic() < deadline:
            self.check_alive(*running)
            time.sleep(0.01)
        return procs.cpu_snapshot(workers), self.received_count()

    def _worker_cpu_per_delivery(
        self, sending: tuple[dict[str, float], int], total: int
    ) -> float | None:
        """The workers' CPU (all of them) per delivery since their first one."""
        before, received = sending
        by_name = {process.name: process.pid for process in self.started}
        after = procs.cpu_snapshot({name: by_name[name] for name in before if name in by_name})
        spent = sum(after[name] - before[name] for name in after)
        return round(1000 * spent / (total - received), 3) if total > received else None

    def warm_up(self, running: list[procs.Managed]) -> None:
        """Deliver a few events through freshly started workers, so that what comes next
        does not time their start (Django loading, first connections, the first look for
        due endpoints) or what the previous step left behind."""
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

    def live(self, workers: int) -> list[procs.Managed]:
        """Workers and scheduler running: ingest N events and time first accept -> last
        receipt (ingestion and delivery share the CPU). Leaves the processes running."""
        label = f"{workers}w"
        say(f"live run: starting {workers} worker(s) + 1 scheduler, warming up")
        running = [*self.start_workers(workers), self.start_scheduler()]
        self.warm_up(running)
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
            # The window the CPU figures cover (first POST to last receipt): CPU seconds
            # of a process = its percent / 100 * this.
            "cpu_window_seconds": round(finished - started, 3),
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
