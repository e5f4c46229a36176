"""Homing end-to-end benchmark: `make bench` (full, ~4-6 min) or `make bench ARGS=--quick`.

Starts everything itself on loopback — throwaway PostgreSQL and Redis (tests/harness.py),
a migrated database, a tenant, gunicorn, Celery workers, the scheduler and a fast
receiver in its own process — measures, prints a table and one `BENCH_JSON {...}` line,
and stops everything it started, also on Ctrl-C or failure. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import procs, stack, steps_flow, steps_oauth, steps_soak, wrk
from bench.measure import Measure
from bench.report import print_table
from bench.stack import BenchError, Stack, say
from bench.steps_delivery import DeliverySteps
from bench.steps_flow import FlowSteps
from bench.steps_headline import BATCH, HeadlineSteps
from bench.steps_oauth import OAuthSteps
from bench.steps_ordering import OrderingSteps
from bench.steps_share import ShareSteps
from bench.steps_soak import SoakSteps
from bench.steps_tracing import TracingSteps
from bench.steps_web import WebSteps


# For the type checker each step mixin stands on what it calls (a Measure over the Stack, or
# another step), so they come in that order; at run time they are plain mixins.
class Bench(
    SoakSteps,
    HeadlineSteps,
    TracingSteps,
    DeliverySteps,
    WebSteps,
    ShareSteps,
    FlowSteps,
    OrderingSteps,
    OAuthSteps,
    Measure,
    Stack,
):
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
        if self.args.only == "filters":  # in-process, on servers of its own
            self.results["filters"] = filters_cost(quick=self.args.quick)
            print_table(self.results)
            print("BENCH_JSON " + json.dumps(self.results, separators=(",", ":")), flush=True)
            return
        if self.args.only == "soak":
            # Migrated with them too: the conversion makes partitions of this interval.
            os.environ.update(steps_soak.ENV)
        self.setup()
        if self.args.only_flow:
            self.start_web()
        else:
            self.pipeline()
        if not self.args.no_flow and self.args.only is None:
            self.isolation()
            self.rate_limit_precision()
            self.tenant_share()
        if self.args.only is None and not self.args.only_flow:
            self.results["filters"] = filters_cost(quick=self.args.quick)
        self.results["seconds_total"] = round(time.monotonic() - t0, 1)
        print_table(self.results)
        print("BENCH_JSON " + json.dumps(self.results, separators=(",", ":")), flush=True)
        if self.args.only == "oauth" and not self.results["oauth"]["target_met"]:
            raise BenchError("OAuth2 token fetches: the target was not met (see above)")
        if not self.args.no_console and not self.args.only_flow and self.args.only is None:
            console_pages(quick=self.args.quick)
        if self.args.only is None and not self.args.only_flow:
            backpressure_cost(quick=self.args.quick)
            hostile_answers(quick=self.args.quick)

    def ingestion_only(self, headline: bool) -> None:
        """The isolated ingestion figures and their ceiling, nothing else (~1 min)."""
        if headline:
            self.wrk_ceiling()
        self.start_web()
        if headline:
            self.ingest_isolated(batch=0)
            self.ingest_isolated(batch=BATCH)
        self.ingest_paced()

    def pipeline(self) -> None:
        """Ceilings, ingestion, backlog drain, live end to end and latency."""
        headline = wrk.available()
        if not headline:
            say("wrk is not installed (apt-get install -y wrk): skipping the wrk-driven figures")
        if self.args.only == "ingestion":
            self.ingestion_only(headline)
            return
        if self.args.only == "ordering":
            self.start_web()
            self.ordering(max(self.args.workers))
            return
        if self.args.only == "drain":
            self.start_web()
            self.raw_ceiling()
            self.aiohttp_ceiling()
            for workers in self.args.workers:
                self.backlog(workers, profile=self.args.profile)
            return
        if self.args.only == "share":
            self.start_web()
            self.tenant_share()
            return
        if self.args.only == "tracing":
            self.tracing_cost(max(self.args.workers))
            return
        if self.args.only == "soak":
            self.soak()
            return
        if self.args.only == "oauth":
            self.start_web()
            self.oauth_tokens()
            return
        self.gunicorn_ceilings()
        if headline:
            self.wrk_ceiling()
        self.start_web()
        self.raw_ceiling()
        self.aiohttp_ceiling()
        if headline:
            self.ingest_isolated(batch=0)
            self.ingest_isolated(batch=BATCH)
        self.ingest_paced()
        for i, workers in enumerate(self.args.workers):
            self.backlog(workers, profile=self.args.profile and i == len(self.args.workers) - 1)
        self.ordering(max(self.args.workers))
        running = self.live(max(self.args.workers))
        try:
            if headline:
                running = self.live_wrk(running, batch=0)
                running = self.live_wrk(running, batch=BATCH)
            self.latency(running)
        finally:
            self.stop(*running)


def console_pages(*, quick: bool) -> None:
    """The staff console's pages with a big queue (bench/console.py, its own PostgreSQL)."""
    dead_letters, attempts = (10_000, 100_000) if quick else (100_000, 1_000_000)
    say(f"console pages: seeding {dead_letters:,} dead letters and {attempts:,} attempts")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.console",
            "--dead-letters",
            str(dead_letters),
            "--attempts",
            str(attempts),
            "--rounds",
            "30" if quick else "100",
        ],
        check=False,
    )


def filters_cost(*, quick: bool) -> dict[str, Any]:
    """A filter's and a schema's µs on a 2 KB event, and ingestion's CPU per event with 100
    filtered endpoints vs none, single and batch (bench/filters.py, its own PostgreSQL)."""
    say("filters: one filter and one schema on a 2 KB event; ingestion with 100 filters vs none")
    done = subprocess.run(
        [sys.executable, "-m", "bench.filters", "--rounds", "4" if quick else "8"],
        check=False,
        stdout=subprocess.PIPE,
        text=True,
    )
    figures: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        if line.startswith("BENCH_FILTERS_JSON "):
            figures = json.loads(line.split(" ", 1)[1])
        else:
            print(line, flush=True)
    return figures


def backpressure_cost(*, quick: bool) -> None:
    """CPU per request of the intake's 429 paths and its check (bench/backpressure.py, its
    own PostgreSQL and Redis)."""
    say("backpressure: the check, the 429 paths and a deep backlog's count")
    backlog = "100000" if quick else "1000000"
    subprocess.run([sys.executable, "-m", "bench.backpressure", "--backlog", backlog], check=False)


def hostile_answers(*, quick: bool) -> None:
    """A healthy tenant's attempts beside endless trailers on the same event loop
    (bench/hostile_answers.py, receivers of its own)."""
    say("hostile answers: healthy attempts' p99 alone and beside endless trailers")
    requests = "1000" if quick else "3000"
    subprocess.run(
        [sys.executable, "-m", "bench.hostile_answers", "--requests", requests], check=False
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Homing end-to-end benchmark")
    parser.add_argument("--quick", action="store_true", help="smaller counts (~1 min)")
    parser.add_argument("--events", type=int, help="events per throughput run (20000; quick 2000)")
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
    parser.add_argument(
        "--ingest-seconds", type=float, help="cap on each ingestion run (45; quick 15)"
    )
    parser.add_argument("--drain-seconds", type=float, help="cap on each drain (60; quick 20)")
    parser.add_argument("--wrk-seconds", type=float, help="each wrk run (10; quick 5)")
    parser.add_argument("--wrk-connections", type=int, default=16, help="wrk, single POSTs")
    parser.add_argument("--wrk-batch-connections", type=int, default=8, help="wrk, batches")
    parser.add_argument(
        "--no-console", action="store_true", help="skip the console pages (seeds a big queue)"
    )
    parser.add_argument(
        "--only",
        choices=["ingestion", "ordering", "share", "drain", "tracing", "filters", "soak", "oauth"],
        help="ingestion: only the isolated ingestion figures and their gunicorn ceiling; "
        "ordering: only one endpoint's backlog drained with and without ordering keys; "
        "share: only a quiet tenant beside another tenant's slow endpoints; "
        "drain: only the aiohttp ceiling and one endpoint's backlog drained (--workers); "
        "tracing: only the live run with tracing off and on (100%% sampled), interleaved; "
        "filters: only a filter's and a schema's cost and ingestion with 100 filters vs none; "
        "soak: one-minute partitions, 5 minutes of retention, ingestion at the drain's rate "
        "for --soak-minutes (bench/README.md); "
        "oauth: OAuth2 token fetches per endpoint and token lifetime under --oauth-rate "
        "events/s for --oauth-seconds (2 endpoints, --oauth-workers workers)",
    )
    parser.add_argument("--soak-minutes", type=float, default=20, help="the soak's length")
    parser.add_argument(
        "--soak-rate", type=float, help="events/s the soak offers (default: the measured drain)"
    )
    parser.add_argument(
        "--soak-share", type=float, default=1.0, help="offer this share of the measured drain"
    )
    parser.add_argument(
        "--soak-sustained",
        action="store_true",
        help="first offer that rate for 2 minutes and soak at 95%% of what the workers then "
        "deliver beside ingestion (the rate this machine sustains with both)",
    )
    parser.add_argument("--paced-rate", type=float, default=200, help="ingestion p99 run, ev/s")
    parser.add_argument(
        "--tracing-rounds", type=int, default=3, help="--only tracing: runs of each side (3)"
    )
    steps_flow.add_arguments(parser)
    steps_oauth.add_arguments(parser)
    args = parser.parse_args(argv)
    args.wrk_seconds = args.wrk_seconds or (5 if args.quick else 10)
    args.paced_seconds = 5 if args.quick else 10
    # 20,000: two workers drain 10,000 in 2-3 s, half of it ramping up (receipts per 250 ms
    # rose from 3,200/s to 5,800/s); the figure then says more of the start than the pace.
    args.events = args.events or (2000 if args.quick else 20000)
    args.latency_seconds = args.latency_seconds or (10 if args.quick else 20)
    steps_flow.fill_defaults(args)
    args.ceiling_requests = 2000 if args.quick else 6000
    args.raw_requests = 5000 if args.quick else 20000
    args.raw_threads = 16
    # Caps that keep a run inside its time budget however slow the platform is; a run
    # that hits one reports what it did in the time (and says so).
    args.ingest_seconds = args.ingest_seconds or (15 if args.quick else 45)
    args.drain_seconds = args.drain_seconds or (20 if args.quick else 60)
    args.tail_seconds = 15 if args.quick else 30
    if args.quick and args.workers == [1, 2]:
        args.workers = [2]
    if args.profile and args.quick:
        args.ingest_seconds = 20  # the web profile samples 10 s of it
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    stack.ENDPOINTS = args.endpoints

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
