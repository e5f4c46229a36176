"""What tracing costs (`--only tracing`): the live end-to-end run repeated in one bench
run, web and workers restarted for each, tracing off and on interleaved (off, on, off,
on, ...; `--tracing-rounds` of each, 3 by default): a machine that gets busier or quieter
during the step weighs on both sides. "On" samples every trace
(OTEL_TRACES_SAMPLER=always_on) and exports it over OTLP/HTTP to a sink in the bench
process; "off" has no OTel variable, and then no process loads span code (no SDK
tracing, no exporter, no span module of ours) nor runs any per attempt
(tests/deliveries/worker/test_attempt_tracing_off.py, tests/e2e/test_tracing_e2e.py): off
is the no-OTel baseline (redis-py 8 loads OpenTelemetry's API for metrics of its own, off
unless an application turns them on, whatever Homing does).

Each run gives deliveries/s (first accept to last receipt) and CPU per delivery: the
workers' own CPU seconds over the run divided by the deliveries (the figure tracing
changes most and a shared machine disturbs least: it counts work done, not time waited),
and the same for all of Homing's processes (web, workers, scheduler: the ingest span is
the web's). The step reports the median of each side and the spread of each side (the
largest relative distance of one run from its side's median: the noise to read the
differences against).
Targets (issue 34): on within 15 % of off, off within 2 % of off."""

from __future__ import annotations

import statistics
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from bench.stack import say

if TYPE_CHECKING:
    from bench.steps_delivery import DeliverySteps as _Base
else:
    _Base = object


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that reads each export and answers 200 (an empty
    ExportTraceServiceResponse), counting what it got."""

    protocol_version = "HTTP/1.1"
    exports = 0
    bytes_in = 0

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", 0))
        self.rfile.read(size)
        _Sink.exports += 1
        _Sink.bytes_in += size
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _cpu_ms_per_delivery(figures: dict[str, Any], *, workers_only: bool) -> float:
    """CPU milliseconds per delivery of the workers (or of every Homing process)."""
    cpu = figures["cpu_percent_of_one_core"]
    names = ("worker",) if workers_only else ("worker", "scheduler", "gunicorn")
    percent = sum(v for k, v in cpu.items() if k.startswith(names))
    delivered = figures["unique_seen"]
    return round(10 * percent * figures["cpu_window_seconds"] / delivered, 3) if delivered else 0.0


def _side(values: list[float]) -> dict[str, float]:
    """The median of a side's runs and their spread around it."""
    median = statistics.median(values)
    spread = max(abs(v - median) for v in values) / median if median else 0.0
    return {"median": round(median, 3), "spread": round(spread, 3)}


def _ratio(on: float, off: float) -> float | None:
    return round(on / off, 3) if off else None


class TracingSteps(_Base):
    def tracing_cost(self, workers: int) -> None:
        sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
        sink.daemon_threads = True
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        tracing_on = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
            "OTEL_TRACES_SAMPLER": "always_on",
        }
        rounds = max(1, self.args.tracing_rounds)
        runs = [("off", {}), ("on", tracing_on)] * rounds
        measured: dict[str, dict[str, list[float]]] = {
            side: {"rate": [], "worker_cpu_ms": [], "homing_cpu_ms": []} for side in ("off", "on")
        }
        try:
            for i, (side, env) in enumerate(runs):
                say(f"tracing {side} ({i // 2 + 1}/{rounds}): web and {workers} worker(s) afresh")
                with self.extra_env(**env):
                    self._web_afresh(first=i == 0)
                    running = self.live(workers)
                self.stop(*running, self.web)
                figures = dict(self.results["delivery_live"][f"{workers}w"])
                rate = figures["deliveries_per_s_first_accept_to_last_receipt"]
                worker_ms = _cpu_ms_per_delivery(figures, workers_only=True)
                homing_ms = _cpu_ms_per_delivery(figures, workers_only=False)
                measured[side]["rate"].append(rate)
                measured[side]["worker_cpu_ms"].append(worker_ms)
                measured[side]["homing_cpu_ms"].append(homing_ms)
                self.results.setdefault("tracing_live", []).append({"tracing": side, **figures})
                say(
                    f"  tracing {side}: {rate} deliveries/s, workers {worker_ms} ms CPU per "
                    f"delivery, all of Homing {homing_ms} ms; other processes "
                    f"{figures['cpu_percent_of_one_core'].get('OTHER-processes')}% of a core"
                )
        finally:
            sink.shutdown()
        summary: dict[str, Any] = {"runs_per_side": rounds, "runs": measured}
        for figure in ("rate", "worker_cpu_ms", "homing_cpu_ms"):
            off, on = _side(measured["off"][figure]), _side(measured["on"][figure])
            summary[figure] = {
                "off": off,
                "on": on,
                "on_vs_off": _ratio(on["median"], off["median"]),
            }
        summary["spans_exported_requests"] = _Sink.exports
        summary["spans_exported_bytes"] = _Sink.bytes_in
        self.results["tracing_cost"] = summary
        rate, worker = summary["rate"], summary["worker_cpu_ms"]
        say(
            f"tracing, medians of {rounds} runs a side: deliveries/s off {rate['off']['median']} "
            f"(spread {rate['off']['spread']:.0%}), on {rate['on']['median']} (spread "
            f"{rate['on']['spread']:.0%}): on = {rate['on_vs_off']:.1%} of off (target >= 85%); "
            f"workers' CPU per delivery off {worker['off']['median']} ms (spread "
            f"{worker['off']['spread']:.0%}), on {worker['on']['median']} ms (spread "
            f"{worker['on']['spread']:.0%}): on = {worker['on_vs_off']} x off; all of Homing's "
            f"CPU: on = {summary['homing_cpu_ms']['on_vs_off']} x off; "
            f"{_Sink.exports} OTLP exports, {_Sink.bytes_in / 1e6:.1f} MB"
        )

    def _web_afresh(self, *, first: bool) -> None:
        """gunicorn started with the current environment; the first time as start_web()
        does (which also makes the bench's endpoints), later only the process."""
        if first:
            self.start_web()
            return
        self.web, self.web_port = self.start_gunicorn("gunicorn", "config.wsgi")
        self.cpu_pids["gunicorn"] = self.web.pid
        self.wait_http(self.web_port, "/healthz", self.web)
