"""Load from `wrk` (C, event loop): the load generator that is never the limit.

A Lua script gives every request its own body (a counter in the order id, so each
event is distinct) and prints one JSON line at the end with the rate, latency
percentiles and error counts. The CPU wrk used is measured from outside
(`RUSAGE_CHILDREN`) and reported with the figures.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SCRIPT = r"""
local counter = 0
local batch = tonumber(os.getenv("BENCH_BATCH") or "0")
local thread_id = 0
local threads = {}

function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
  table.insert(threads, thread)
end

function init(args)
  wrk.method = os.getenv("BENCH_METHOD") or "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY")
  non2xx = 0
end

local function event(i)
  return string.format(
    '{"type":"%s","data":{"order_id":"ord_%d_%010d","amount":4200,"currency":"EUR",' ..
    '"customer":{"id":"cus_0987654321","email":"alice@example.com"},' ..
    '"items":[{"sku":"SKU-1","qty":2},{"sku":"SKU-2","qty":1}]}}',
    os.getenv("BENCH_TYPE") or "order.paid", tid, i)
end

function request()
  if wrk.method == "GET" then
    return wrk.format(nil)
  end
  counter = counter + 1
  if batch > 0 then
    local items = {}
    for k = 1, batch do
      items[k] = event(counter * batch + k)
    end
    return wrk.format(nil, nil, nil, '{"events":[' .. table.concat(items, ",") .. ']}')
  end
  return wrk.format(nil, nil, nil, event(counter))
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + (thread:get("non2xx") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"seconds":%.3f,"p50_ms":%.2f,"p90_ms":%.2f,"p99_ms":%.2f,' ..
    '"max_ms":%.2f,"non2xx":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3,
    latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3,
    bad, e.connect + e.read + e.write + e.timeout))
end
"""


@dataclass
class WrkResult:
    requests: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    non2xx: int
    socket_errors: int
    client_cpu_seconds: float
    batch: int

    @property
    def rate(self) -> float:
        """Accepted requests per second."""
        return (self.requests - self.non2xx) / self.seconds if self.seconds else 0.0

    @property
    def events_rate(self) -> float:
        return self.rate * max(1, self.batch)

    def figures(self) -> dict[str, float | int | None]:
        return {
            "rate": round(self.rate, 1),
            "events_per_s": round(self.events_rate, 1),
            "p50_ms": round(self.p50_ms, 1),
            "p99_ms": round(self.p99_ms, 1),
            "max_ms": round(self.max_ms, 1),
            "requests": self.requests,
            "errors": self.non2xx + self.socket_errors,
            "batch": self.batch,
            "load_generator_cpu_percent": round(100 * self.client_cpu_seconds / self.seconds, 1)
            if self.seconds
            else None,
        }


def available() -> bool:
    return shutil.which("wrk") is not None


def run(
    *,
    port: int,
    path: str,
    api_key: str,
    seconds: float,
    connections: int,
    batch: int = 0,
    event_type: str = "order.paid",
    threads: int = 1,
    method: str = "POST",
) -> WrkResult:
    """POST distinct events (or batches of `batch`) for `seconds` over `connections`."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(SCRIPT)
    env = {
        "BENCH_KEY": api_key,
        "BENCH_BATCH": str(batch),
        "BENCH_TYPE": event_type,
        "BENCH_METHOD": method,
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{max(connections, threads)}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "30s",
            "-s",
            script.name,
            f"http://127.0.0.1:{port}{path}",
        ],
        env={**_path_env(), **env},
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(script.name).unlink(missing_ok=True)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if done.returncode or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout[-500:]}{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return WrkResult(**json.loads(line[len("WRK_JSON ") :]), client_cpu_seconds=cpu, batch=batch)


def get(*, port: int, path: str, seconds: float, connections: int) -> WrkResult:
    """GET one path as fast as it answers: a server's ceiling."""
    return run(
        port=port, path=path, api_key="", seconds=seconds, connections=connections, method="GET"
    )


def _path_env() -> dict[str, str]:
    import os

    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
