"""What tracing costs (`--only tracing`): the live end-to-end run three times in one
bench run, web and workers restarted for each: tracing off, on with every trace sampled
(OTEL_TRACES_SAMPLER=always_on) and exported over OTLP/HTTP to a local sink, off again and
on again (A B A B: a machine that gets busier or quieter during the step weighs on both
sides, and shows as off vs off). Besides deliveries/s, the CPU of Homing's own processes
(web, workers, scheduler) per delivery: the figure a busy machine disturbs least.
Targets (issue 34): on within 15 % of off, off within 2 % of off."""

from __future__ import annotations

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


class TracingSteps(_Base):
    def tracing_cost(self, workers: int) -> None:
        sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
        sink.daemon_threads = True
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        tracing_on = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
            "OTEL_TRACES_SAMPLER": "always_on",
        }
        rates: dict[str, float] = {}
        cpu_ms: dict[str, float] = {}
        runs: tuple[tuple[str, dict[str, str]], ...] = (
            ("off", {}),
            ("on", tracing_on),
            ("off again", {}),
            ("on again", tracing_on),
        )
        try:
            for label, env in runs:
                say(f"tracing {label}: web and {workers} worker(s) started afresh")
                with self.extra_env(**env):
                    self._web_afresh(first=not rates)
                    running = self.live(workers)
                self.stop(*running, self.web)
                figures = self.results["delivery_live"][f"{workers}w"]
                rate = figures["deliveries_per_s_first_accept_to_last_receipt"]
                rates[label] = rate
                cpu = figures["cpu_percent_of_one_core"]
                homing = sum(
                    v
                    for k, v in cpu.items()
                    if k == "gunicorn" or k.startswith(("worker", "scheduler"))
                )
                cpu_ms[label] = round(10 * homing / rate, 3) if rate else 0.0
                self.results.setdefault("tracing_live", {})[label] = dict(figures)
        finally:
            sink.shutdown()
        off = (rates["off"] + rates["off again"]) / 2
        on = (rates["on"] + rates["on again"]) / 2
        cpu_off = (cpu_ms["off"] + cpu_ms["off again"]) / 2
        cpu_on = (cpu_ms["on"] + cpu_ms["on again"]) / 2
        summary = {
            "deliveries_per_s": rates,
            "homing_cpu_ms_per_delivery": cpu_ms,
            "on_vs_off": round(on / off, 3),
            "off_vs_off": round(rates["off again"] / rates["off"], 3),
            "cpu_on_vs_off": round(cpu_on / cpu_off, 3) if cpu_off else None,
            "spans_exported_requests": _Sink.exports,
            "spans_exported_bytes": _Sink.bytes_in,
        }
        self.results["tracing_cost"] = summary
        say(
            f"tracing: live deliveries/s {rates}; on = {summary['on_vs_off']:.1%} of off "
            f"(target >= 85%), off again = {summary['off_vs_off']:.1%} of off (target within "
            f"2%); Homing's CPU per delivery (ms) {cpu_ms}: on = {summary['cpu_on_vs_off']} x "
            f"off; {_Sink.exports} OTLP exports, {_Sink.bytes_in / 1e6:.1f} MB"
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
