"""Bench steps on flow control (issue #14), each with a tenant and endpoints of its own:

- isolation: nine fast endpoints of one tenant drain the same backlog twice, without
  and then with a tenth endpoint that accepts the connection and never answers; the
  healthy deliveries/s with it over without it is the isolation ratio;
- rate-limit precision: one endpoint with `rate_limit`, a backlog of ~10 s worth and
  several worker processes; at the receiver, the most requests in any sliding 1-second
  window, the mean rate against the limit and the spacing of the arrivals.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import load
from bench.report import fmt_cpu
from bench.stack import BenchError, event_body, say

HEALTHY = 9  # fast endpoints; the isolation run adds one hanging endpoint to them
QUEUE_BATCH = 100  # events per POST /api/v1/events/batch while queueing a backlog


class FlowSteps:
    # --- isolation ---------------------------------------------------------------------

    def isolation(self) -> None:
        """Run A (nine healthy endpoints) and run B (the same nine plus one hanging), each
        from a queued backlog of the same size; the ratio of their healthy rates."""
        without = self._isolation_run(hanging=False)
        with_hanging = self._isolation_run(hanging=True)
        rate_a = without["healthy_deliveries_per_s"]
        rate_b = with_hanging["healthy_deliveries_per_s"]
        ratio = round(rate_b / rate_a, 3) if rate_a and rate_b else None
        from_launch = (
            with_hanging["healthy_deliveries_per_s_from_launch"]
            / without["healthy_deliveries_per_s_from_launch"]
        )
        self.results["isolation"] = {
            "ratio": ratio,
            # The same counted from the workers' launch: start-up is in it, so it is
            # noisier, but it also shows a hanging endpoint that delays the first receipt.
            "ratio_from_launch": round(from_launch, 3),
            "target": 0.95,
            "healthy_endpoints": HEALTHY,
            "events": self.args.isolation_events,
            "workers": self.args.isolation_workers,
            "delivery_timeout_s": self.args.hang_timeout,
            "without_hanging": without,
            "with_hanging": with_hanging,
        }
        say(
            f"isolation: healthy {rate_b} del/s with 1 hanging endpoint in {HEALTHY + 1} / "
            f"{rate_a} without = {ratio} (target >= 0.95)"
        )

    def _isolation_run(self, *, hanging: bool) -> dict[str, Any]:
        label = "with" if hanging else "without"
        _, auth = self.create_tenant(f"isolation-{label}-hanging")
        base = f"http://127.0.0.1:{self.receiver_port}"
        for k in range(HEALTHY):
            self.create_endpoint(auth, url=f"{base}/hook/iso-{label}-{k}", event_types=[])
        if hanging:
            self.create_endpoint(auth, url=f"{base}/hang/iso", event_types=[])
        n, workers = self.args.isolation_events, self.args.isolation_workers
        self.receiver("POST", "/_reset")
        say(
            f"isolation run {label} the hanging endpoint: queueing {n} events x "
            f"{HEALTHY + hanging} endpoints, then {workers} workers (delivery timeout "
            f"{self.args.hang_timeout:g} s)"
        )
        ids = self.queue_events(auth, n)
        # A short timeout so the hanging endpoint's attempts end within the run.
        with self.extra_env(HOMING_DELIVERY_TIMEOUT=f"{self.args.hang_timeout:g}"):
            figures, dump = self._drain(f"isolation-{label}", workers, expected=HEALTHY * len(ids))
        received = Counter(webhook_id for webhook_id, _ in dump["records"])
        figures.update(
            {
                "events": len(ids),
                "healthy_expected": HEALTHY * len(ids),
                "healthy_received": len(dump["records"]),
                "duplicates": sum(max(0, c - HEALTHY) for c in received.values()),
                "missing": sum(max(0, HEALTHY - received[i]) for i in ids),
                "unexpected": len(set(received) - ids),
                "hanging_requests": dump["hung"],
            }
        )
        figures["healthy_deliveries_per_s"] = figures.pop("per_s_first_to_last")
        figures["healthy_deliveries_per_s_from_launch"] = figures.pop("per_s_from_launch")
        say(
            f"isolation [{label} hanging]: {figures['healthy_deliveries_per_s']} healthy "
            f"del/s (first->last receipt), {figures['healthy_received']}/"
            f"{figures['healthy_expected']}, hanging requests {dump['hung']}, duplicates "
            f"{figures['duplicates']}, missing {figures['missing']}; CPU %: "
            f"{fmt_cpu(figures['cpu_percent_of_one_core'])}"
        )
        return figures

    # --- rate-limit precision -----------------------------------------------------------

    def rate_limit_precision(self) -> None:
        limit, workers = self.args.rate_limit, self.args.rate_limit_workers
        n = round(limit * self.args.rate_limit_seconds)
        _, auth = self.create_tenant("rate-limited")
        self.create_endpoint(
            auth,
            url=f"http://127.0.0.1:{self.receiver_port}/hook/rate-limited",
            event_types=[],
            rate_limit=limit,
        )
        self.receiver("POST", "/_reset")
        say(f"rate limit {limit}/s: queueing {n} events, then {workers} workers")
        ids = self.queue_events(auth, n)
        figures, dump = self._drain(
            "rate-limit", workers, expected=len(ids), timeout=2 * n / limit + 30
        )
        times = sorted(t for _, t in dump["records"])
        figures.update(
            {
                "rate_limit": limit,
                **self._check(dump["records"], ids),
                **arrival_figures(times, limit),
            }
        )
        figures.pop("per_s_first_to_last")
        figures.pop("per_s_from_launch")
        self.results["rate_limit"] = figures
        say(
            f"rate limit {limit}/s [{workers}w]: at most {figures['max_in_1s_window']} in any "
            f"1 s window, mean {figures['mean_rate']}/s, gaps p50 {figures['gap_p50_ms']} ms "
            f"p99 {figures['gap_p99_ms']} ms min {figures['gap_min_ms']} ms "
            f"(1/rate {figures['interval_ms']} ms), {figures['unique_seen']}/{len(ids)} "
            f"received, duplicates {figures['duplicates']}"
        )

    # --- shared ---------------------------------------------------------------------------

    def queue_events(self, auth: dict[str, str], n: int) -> set[str]:
        """Queue n events as the tenant of `auth` (no worker running); their ids."""

        def post(start: int) -> list[str]:
            events = [json.loads(event_body(i)) for i in range(start, min(n, start + QUEUE_BATCH))]
            status, data = self.http(
                self.web_port, "POST", "/api/v1/events/batch", {"events": events}, auth
            )
            if status != 202:
                raise BenchError(f"queueing a batch answered {status}: {data[:300]!r}")
            return [event["id"] for event in json.loads(data)["events"]]

        with ThreadPoolExecutor(4) as pool:
            return {i for batch in pool.map(post, range(0, n, QUEUE_BATCH)) for i in batch}

    def _drain(
        self, label: str, workers: int, *, expected: int, timeout: float | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start the workers and the scheduler on a queued backlog, wait until the
        receiver has `expected` requests (or the time cap), stop them and clear what is
        left. The receiver's dump and the timing figures."""
        launched = time.monotonic()
        running = [*self.start_workers(workers), self.start_scheduler()]
        cpu0 = self._snap({**self.cpu_pids, **{p.name: p.pid for p in running}})
        try:
            complete = self.wait_received(
                expected, running, timeout=timeout or self.args.drain_seconds, stall=20
            )
            finished = time.monotonic()
            time.sleep(0.5)  # let any late duplicate arrive
            cpu = self._cpu_delta(cpu0, finished - launched)
        finally:
            self.stop(*running)
        dump = self.dump()
        leftover = self.reset_backlog()
        self._verify_samples(dump["samples"])
        times = [t for _, t in dump["records"]] or [launched]
        first, last = min(times), max(times)
        return {
            "workers": workers,
            "complete": complete,
            "left_undelivered_at_cap": leftover,
            "per_s_first_to_last": round((len(times) - 1) / (last - first), 1)
            if last > first
            else None,
            "per_s_from_launch": round(len(times) / (last - launched), 1),
            "seconds_launch_to_first": round(first - launched, 2),
            "seconds_first_to_last": round(last - first, 2),
            "cpu_percent_of_one_core": cpu,
        }, dump


def arrival_figures(times: list[float], limit: int) -> dict[str, Any]:
    """How a rate limit looked from the receiver: arrival times sorted, in seconds."""
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # The tightest span holding limit + 1 arrivals: under 1 s means some 1-second
    # window, wherever it starts, held more than the limit.
    spans = [times[i + limit] - times[i] for i in range(len(times) - limit)]
    elapsed = times[-1] - times[0] if len(times) > 1 else 0.0
    mean = (len(times) - 1) / elapsed if elapsed else None
    return {
        "max_in_1s_window": max_in_window(times, 1.0),
        "tightest_span_of_limit_plus_1_s": round(min(spans), 3) if spans else None,
        "mean_rate": round(mean, 2) if mean else None,
        "mean_rate_share_of_limit": round(mean / limit, 3) if mean else None,
        "interval_ms": round(1e3 / limit, 1),
        "gap_p50_ms": _ms(load.percentile(gaps, 50)),
        "gap_p99_ms": _ms(load.percentile(gaps, 99)),
        "gap_min_ms": _ms(min(gaps)) if gaps else None,
        "gap_max_ms": _ms(max(gaps)) if gaps else None,
    }


def max_in_window(times: list[float], width: float) -> int:
    """The most arrivals in any window [t, t + width) of sorted times (sliding)."""
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= width:
            start += 1
        most = max(most, end - start + 1)
    return most


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 1)
