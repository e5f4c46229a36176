"""The soak (`python -m bench.run --only soak`, issue 35): one-minute partitions and five
minutes of retention under ingestion at the drain's own sustained rate, for
`--soak-minutes` (20). Per minute: the history tables' size and rows, deliveries made
and delivered, the drops (rows, ms) and ingestion p99 during drops vs between. At the
end: deliveries lost or repeated, and whether the size held within ±15 % after the
first retention period. The database is migrated with these settings (bench/run.py), so
its partitions are one minute from the start."""

from __future__ import annotations

import http.client
import itertools
import json
import queue
import threading
import time
from collections import Counter
from statistics import mean
from typing import TYPE_CHECKING, Any

from bench import soak_watch
from bench.load import _Client, percentile
from bench.soak_watch import Request, Watch
from bench.stack import BenchError, event_body, say

if TYPE_CHECKING:
    from bench.steps_web import WebSteps as _Base  # mixed into bench.run.Bench
else:
    _Base = object

ENV = {"HOMING_PARTITION_INTERVAL": "1m", "HOMING_RETENTION": "5m"}
RETENTION_S = 300
BATCH = 100  # events per POST /api/v1/events/batch
PROBE_RATE = 10  # single POSTs per second beside the batches: the p99 of one event
SAMPLE_EVERY = 5.0  # seconds
STEADY_BAND = 0.15  # the target: within ±15 % after the first retention period
CALIBRATION_MINUTES = 2  # --soak-sustained: ingestion at the drain's rate, the 2nd minute counts
SUSTAINED_SHARE = 0.95  # of the sustained rate: slack for the machine's own spikes


class SoakSteps(_Base):
    def soak(self) -> None:
        minutes = self.args.soak_minutes
        soak_watch.lock_waits_on(self._dsn())
        self.start_web()
        queued = 0
        if not self.args.soak_rate:  # a backlog for the drain, queued with no worker running
            self.receiver("POST", "/_reset")
            say(f"soak: queueing {self.args.events} events to measure the drain")
            queued = self._soak_post_events(self.args.events)
        running = self.start_workers(max(self.args.workers))
        with self.extra_env(LOG_LEVEL="INFO"):  # its drops, and what it kept and why
            running.append(self.start_scheduler())
        try:
            rate = self.args.soak_rate or (
                self._soak_drain_rate(queued, running) * self.args.soak_share
            )
            if self.args.soak_sustained:
                rate = self._soak_sustained_rate(rate, running) * SUSTAINED_SHARE
            say(
                f"soak: {minutes} min at {rate:.0f} events/s (batches of {BATCH}) + "
                f"{PROBE_RATE}/s single POSTs; partitions {ENV['HOMING_PARTITION_INTERVAL']}, "
                f"retention {ENV['HOMING_RETENTION']}"
            )
            watch, accepted, started = self._soak_run(rate, minutes * 60, running)
            figures = self._soak_figures(watch, accepted, started, rate, running)
        finally:
            self.stop(*running)
        self.results["soak"] = figures

    def _soak_drain_rate(self, queued: int, running: list[Any]) -> float:
        """Deliveries/s while the workers drain the queued backlog: the rate the soak then
        offers."""
        if not self.wait_received(queued, running, timeout=self.args.drain_seconds * 3):
            raise BenchError("the drain before the soak did not finish")
        times = [t for _, t in self.dump()["records"]]
        # The first tenth left out: the workers ramp up while the backlog is still queued.
        times.sort()
        skip = len(times) // 10
        rate = (len(times) - skip) / (times[-1] - times[skip])
        say(f"soak: the drain made {rate:.0f} deliveries/s")
        self.results["soak_drain_rate"] = round(rate, 1)
        self.receiver("POST", "/_reset")
        return rate

    def _soak_sustained_rate(self, offered: float, running: list[Any]) -> float:
        """Deliveries/s the workers keep up while ingestion at `offered` events/s runs
        beside them (the second of two minutes): the drain's sustained rate on a machine
        where the web, PostgreSQL and this load share the cores with the workers. Its
        deliveries are awaited and forgotten before the soak."""
        watch, accepted, counts = Watch(), set[str](), list[int]()

        def count_each_minute() -> None:
            for minute in range(1, CALIBRATION_MINUTES + 1):
                time.sleep(max(0.0, started + 60 * minute - time.monotonic()))
                counts.append(self.received_count())

        say(f"soak: {offered:.0f} events/s for {CALIBRATION_MINUTES} min: the sustained rate?")
        started = time.monotonic()
        counter = threading.Thread(target=count_each_minute, daemon=True)
        counter.start()
        self._soak_send(
            watch=watch,
            accepted=accepted,
            rate=offered / BATCH,
            seconds=CALIBRATION_MINUTES * 60,
            batch=True,
            alive=lambda: self.check_alive(*running),
        )
        counter.join(timeout=120)
        sustained = (counts[-1] - counts[-2]) / 60
        say(f"soak: the workers delivered {sustained:.0f}/s beside ingestion; draining the rest")
        self.results["soak_sustained_rate"] = round(sustained, 1)
        if not self.wait_received(len(accepted), running, timeout=1800):
            raise BenchError("the calibration's deliveries did not finish")
        self.receiver("POST", "/_reset")
        return sustained

    def _soak_post_events(self, n: int) -> int:
        client, queued = _Client(self.web_port), 0
        for start in range(0, n, BATCH):
            sample = client.call("POST", "/api/v1/events/batch", _batch(start), self.auth, False)
            if sample is None or sample.status != 202:
                raise BenchError(f"queueing a batch failed: {sample}")
            queued += BATCH
        return queued

    def _soak_run(
        self, rate: float, seconds: float, running: list[Any]
    ) -> tuple[Watch, set[str], float]:
        watch, accepted = Watch(), set[str]()
        stop = threading.Event()
        started = time.time()

        def sampler() -> None:
            next_at = time.monotonic()
            while not stop.is_set():
                if got := soak_watch.sample(self._dsn(), self.received_count):
                    watch.samples.append(got)
                next_at += SAMPLE_EVERY
                stop.wait(max(0.0, next_at - time.monotonic()))

        def minute_lines() -> None:
            for minute in itertools.count(1):
                if stop.wait(max(0.0, started + 60 * minute - time.time())):
                    return
                self._soak_print_minute(watch, minute, started)

        helpers = [threading.Thread(target=f, daemon=True) for f in (sampler, minute_lines)]
        for thread in helpers:
            thread.start()
        probe = threading.Thread(
            target=self._soak_send,
            kwargs={
                "watch": watch,
                "accepted": accepted,
                "rate": PROBE_RATE,
                "seconds": seconds,
                "batch": False,
            },
            daemon=True,
        )
        probe.start()
        try:
            self._soak_send(
                watch=watch,
                accepted=accepted,
                rate=rate / BATCH,
                seconds=seconds,
                batch=True,
                alive=lambda: self.check_alive(*running),
            )
        finally:
            probe.join(timeout=60)
            stop.set()
            for thread in helpers:
                thread.join(timeout=30)
        return watch, accepted, started

    def _soak_send(
        self,
        *,
        watch: Watch,
        accepted: set[str],
        rate: float,
        seconds: float,
        batch: bool,
        alive: Any = None,
    ) -> None:
        """Open loop: request i starts at t0 + i/rate (up to 16 in flight)."""
        slots: queue.Queue[int | None] = queue.Queue()
        path = "/api/v1/events/batch" if batch else "/api/v1/events"
        into = watch.requests if batch else watch.probes

        def worker() -> None:
            client = _Client(self.web_port)
            while (i := slots.get()) is not None:
                body = _batch(i * BATCH) if batch else event_body(i + 10**9)
                at = time.time()
                t0 = time.perf_counter()
                status, data = 0, b""
                # Twice: gunicorn closes a kept-alive connection idle for 2 s, and the
                # first request on it then fails before the server reads it.
                for _ in range(2):
                    try:
                        client.conn.request("POST", path, body=body, headers=self.auth)
                        response = client.conn.getresponse()
                        status, data = response.status, response.read()
                        break
                    except (OSError, http.client.HTTPException):
                        client.conn.close()
                took = time.perf_counter() - t0
                ids = _ids(data, batch) if status == 202 else []
                with watch.lock:
                    into.append(Request(at, took, status, len(ids)))
                    accepted.update(ids)

        pool = [threading.Thread(target=worker, daemon=True) for _ in range(16)]
        for thread in pool:
            thread.start()
        start = time.monotonic()
        for i in range(int(rate * seconds)):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if alive and i % 50 == 0:
                alive()
            slots.put(i)
        for _ in pool:
            slots.put(None)
        for thread in pool:
            thread.join(timeout=60)

    def _soak_print_minute(self, watch: Watch, minute: int, started: float) -> None:
        lo, hi = started + 60 * (minute - 1), started + 60 * minute
        inside = [s for s in watch.samples if s.at <= hi]
        if not inside:
            return
        last = inside[-1]
        before = [s for s in watch.samples if s.at <= lo]
        delivered = last.received - (before[-1].received if before else 0)
        with watch.lock:
            made = sum(r.events for r in watch.requests + watch.probes if lo <= r.started < hi)
        rows = "/".join(f"{last.rows[t]:,}" for t in soak_watch.HISTORY)
        say(
            f"  min {minute:>2}: history {last.bytes_total / 2**20:,.0f} MB, rows "
            f"events/deliveries/attempts {rows}; made {made:,}, delivered {delivered:,}"
        )

    def _soak_figures(
        self, watch: Watch, accepted: set[str], started: float, rate: float, running: list[Any]
    ) -> dict[str, Any]:
        say(f"soak: ingestion done; waiting for the last of {len(accepted):,} deliveries")
        complete = self.wait_received(len(accepted), running, timeout=300)
        time.sleep(2.0)  # a late duplicate would arrive now
        check = self._check(self.dump()["records"], accepted)
        scheduler_log = self.logs / "scheduler.log"
        dropped, kept = soak_watch.drops(scheduler_log)
        dropped = [d for d in dropped if d.end >= started]
        for drop in dropped:
            drop.rows = soak_watch.rows_dropped(drop, watch.samples)
        names = soak_watch.relation_names(self._dsn())
        assert self.postgres is not None
        waits, timeouts = soak_watch.lock_waits(self.postgres.log, since=started, names=names)
        created, skipped = soak_watch.creates(scheduler_log)
        created = [c for c in created if c.end >= started]
        windows = [(d.end - d.ms / 1000, d.end) for d in dropped]
        making = [(c.end - c.ms / 1000, c.end) for c in created]
        figures: dict[str, Any] = {
            "minutes": self.args.soak_minutes,
            "offered_events_per_s": round(rate, 1),
            "complete": complete,
            **check,
            "drops": len(dropped),
            "kept": kept[:10],
            "drop_ms": [round(d.ms) for d in dropped],
            "drop_locked_ms": [d.locked_ms for d in dropped],
            "create_locked_ms_max": max(
                (c.locked_ms for c in created if c.locked_ms is not None), default=None
            ),
            "drop_rows": [d.rows for d in dropped],
            "creates": len(created),
            "create_ms_max": max((round(c.ms) for c in created), default=None),
            "create_skipped": skipped[:10],
            "lock_waits_over_10ms": _waits(waits),
            "lock_timeouts": timeouts,
        }
        for name, requests in (("batch", watch.requests), ("single", watch.probes)):
            ok = [r for r in requests if r.status == 202]
            hit = [r.seconds for r in ok if soak_watch.during(r, windows)]
            rest = [r.seconds for r in ok if not soak_watch.during(r, windows + making)]
            creating = [r.seconds for r in ok if soak_watch.during(r, making)]
            figures[f"ingest_{name}"] = {
                "requests": len(requests),
                "errors": len(requests) - len(ok),
                "statuses": dict(Counter(r.status for r in requests)),
                "during_drops": len(hit),
                "p99_ms_during_drops": _ms(percentile(hit, 99)),
                "max_ms_during_drops": _ms(max(hit, default=float("nan"))),
                "p99_ms_between": _ms(percentile(rest, 99)),
                "during_creates": len(creating),
                "p99_ms_during_creates": _ms(percentile(creating, 99)),
            }
        figures.update(_steady(watch.samples, started))
        figures["per_minute"] = _per_minute(watch, dropped, started)
        _print(figures)
        return figures


def _batch(start: int) -> bytes:
    events = [json.loads(event_body(i)) for i in range(start, start + BATCH)]
    return json.dumps({"events": events}, separators=(",", ":")).encode()


def _ids(data: bytes, batch: bool) -> list[str]:
    answer = json.loads(data)
    return [e["id"] for e in answer["events"]] if batch else [answer["id"]]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _waits(waits: list[soak_watch.LockWait]) -> dict[str, Any]:
    by: dict[str, list[float]] = {}
    for wait in waits:
        by.setdefault(f"{wait.mode} on {wait.relation}", []).append(wait.ms)
    return {k: {"n": len(v), "max_ms": round(max(v), 1)} for k, v in sorted(by.items())}


def _steady(samples: list[soak_watch.Sample], started: float) -> dict[str, Any]:
    """The size after the first retention period (and the interval being filled) against
    its mean: the largest deviation, and whether it stays within STEADY_BAND."""
    after = [s.bytes_total for s in samples if s.at >= started + RETENTION_S + 60]
    if len(after) < 2:
        return {"steady_samples": len(after)}
    middle = mean(after)
    worst = max(abs(b - middle) for b in after) / middle
    return {
        "steady_samples": len(after),
        "steady_mean_mb": round(middle / 2**20, 1),
        "steady_min_mb": round(min(after) / 2**20, 1),
        "steady_max_mb": round(max(after) / 2**20, 1),
        "steady_worst_deviation": round(worst, 3),
        "steady_within_band": worst <= STEADY_BAND,
    }


def _per_minute(
    watch: Watch, dropped: list[soak_watch.Drop], started: float
) -> list[dict[str, Any]]:
    rows, previous, made_so_far = [], 0, 0
    for minute in itertools.count(1):
        lo, hi = started + 60 * (minute - 1), started + 60 * minute
        inside = [s for s in watch.samples if lo < s.at <= hi]
        if not inside:
            break
        last = inside[-1]
        drops = [d for d in dropped if lo <= d.end < hi]
        batches = [r.seconds for r in watch.requests if lo <= r.started < hi and r.status == 202]
        made = sum(r.events for r in watch.requests + watch.probes if lo <= r.started < hi)
        made_so_far += made
        rows.append(
            {
                "minute": minute,
                "history_mb": round(last.bytes_total / 2**20, 1),
                **{table: last.rows[table] for table in soak_watch.HISTORY},
                "made": made,
                "delivered": last.received - previous,
                "backlog": made_so_far - last.received,
                "drops": [f"{d.rows:,} rows {d.ms:.0f} ms" for d in drops],
                "batch_p99_ms": _ms(percentile(batches, 99)),
            }
        )
        previous = last.received
    return rows


def _print(f: dict[str, Any]) -> None:
    print("\nSOAK per minute (history = events + deliveries + attempts, all partitions)")
    print(
        f"{'min':>3} {'MB':>7} {'events':>9} {'deliveries':>10} {'attempts':>9} {'made':>7} "
        f"{'delivered':>9} {'backlog':>8} {'batch p99':>9}  drops (rows, time)"
    )
    for m in f["per_minute"]:
        print(
            f"{m['minute']:>3} {m['history_mb']:>7} {m['webhooks_event']:>9,} "
            f"{m['deliveries_delivery']:>10,} {m['deliveries_attempt']:>9,} {m['made']:>7,} "
            f"{m['delivered']:>9,} {m['backlog']:>8,} {m['batch_p99_ms']:>6} ms  "
            f"{'; '.join(m['drops'])}"
        )
    print(
        f"\naccepted {f['accepted']:,}, received {f['received']:,}, duplicates "
        f"{f['duplicates']}, missing {f['missing']}, unexpected {f['unexpected']}"
    )
    print(f"drops {f['drops']}: ms {f['drop_ms']}; rows {f['drop_rows']}")
    print(f"history locked per drop, ms: {f['drop_locked_ms']}")
    print(f"kept instead of dropped: {f['kept'] or 'none'}; lock timeouts {f['lock_timeouts']}")
    print(
        f"partitions created {f['creates']} (slowest {f['create_ms_max']} ms, DEFAULT locked "
        f"at most {f['create_locked_ms_max']} ms); skipped: "
        f"{f['create_skipped'] or 'none'}"
    )
    print(f"lock waits over 10 ms: {f['lock_waits_over_10ms'] or 'none'}")
    for name in ("batch", "single"):
        g = f[f"ingest_{name}"]
        print(
            f"ingestion [{name}]: p99 {g['p99_ms_during_drops']} ms during drops "
            f"({g['during_drops']} requests, max {g['max_ms_during_drops']} ms), "
            f"{g['p99_ms_during_creates']} ms during creates ({g['during_creates']}), "
            f"{g['p99_ms_between']} ms between them; answers {g['statuses']}"
        )
    if "steady_mean_mb" in f:
        print(
            f"size after the first retention period: mean {f['steady_mean_mb']} MB, "
            f"{f['steady_min_mb']}..{f['steady_max_mb']} MB, worst "
            f"{f['steady_worst_deviation']:+.1%} (target ±{STEADY_BAND:.0%}): "
            f"{'held' if f['steady_within_band'] else 'NOT held'}"
        )
    print(flush=True)
