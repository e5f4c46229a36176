"""Load generators: closed-loop HTTP clients, a paced (open-loop) sender, and the raw
pooled client that gives the delivery ceiling. Threads + http.client/urllib3, stdlib-light.

Every request is timed with time.perf_counter(); the moment its answer arrived is also
kept as time.monotonic() (system-wide on Linux, so it compares with the receiver's).
"""

from __future__ import annotations

import http.client
import itertools
import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

HOST = "127.0.0.1"


@dataclass
class Sample:
    done_at: float  # time.monotonic() when the answer had been read
    latency: float  # seconds
    status: int
    event_id: str | None


@dataclass
class LoadResult:
    samples: list[Sample] = field(default_factory=list)
    errors: int = 0
    wall: float = 0.0
    client_cpu: float = 0.0  # CPU seconds the load generator itself used (this process)
    late_starts: int = 0  # paced runs: requests that started >10 ms after their slot

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if 200 <= s.status < 300]

    @property
    def rate(self) -> float:
        return len(self.ok) / self.wall if self.wall else 0.0

    def percentile(self, q: float) -> float:
        return percentile([s.latency for s in self.ok], q)

    @property
    def first_done(self) -> float:
        return min(s.done_at for s in self.ok)

    @property
    def last_done(self) -> float:
        return max(s.done_at for s in self.ok)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class _Client:
    """One http.client connection; reconnects by itself when the server closes it
    (gunicorn's sync workers close after every response)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)

    def call(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], want_id: bool
    ) -> Sample | None:
        started = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            return None
        finished = time.perf_counter()
        event_id = None
        if want_id and response.status == 202:
            event_id = json.loads(data)["id"]
        return Sample(time.monotonic(), finished - started, response.status, event_id)


def closed_loop(
    *,
    port: int,
    method: str,
    path: str,
    clients: int,
    total: int,
    headers: dict[str, str],
    body: Callable[[int], bytes] | None = None,
    want_id: bool = False,
    progress: Callable[[int], None] | None = None,
    seconds: float | None = None,
) -> LoadResult:
    """`clients` threads, each sending its next request as soon as the last one answered,
    until `total` requests have been sent or `seconds` have passed."""
    deadline = time.monotonic() + seconds if seconds else float("inf")
    counter = itertools.count()
    result = LoadResult()
    lock = threading.Lock()
    done = itertools.count(1)

    def worker() -> None:
        client = _Client(port)
        mine: list[Sample] = []
        errors = 0
        while (i := next(counter)) < total and time.monotonic() < deadline:
            sample = client.call(method, path, body(i) if body else None, headers, want_id)
            if sample is None:
                errors += 1
            else:
                mine.append(sample)
            n = next(done)
            if progress and n % 1000 == 0:
                progress(n)
        with lock:
            result.samples += mine
            result.errors += errors

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.wall = time.perf_counter() - wall0
    result.client_cpu = time.process_time() - cpu0
    return result


def paced(
    *,
    port: int,
    path: str,
    rate: float,
    duration: float,
    headers: dict[str, str],
    body: Callable[[int], bytes],
    threads: int = 64,
) -> LoadResult:
    """Open loop: request i starts at t0 + i/rate whatever happened to the ones before
    (up to `threads` in flight), so a slow answer does not lower the offered load."""
    total = int(rate * duration)
    slots: queue.Queue[tuple[int, float] | None] = queue.Queue()
    result = LoadResult()
    lock = threading.Lock()

    def worker() -> None:
        client = _Client(port)
        while (item := slots.get()) is not None:
            i, due = item
            if time.monotonic() - due > 0.010:
                with lock:
                    result.late_starts += 1
            sample = client.call("POST", path, body(i), headers, True)
            with lock:
                if sample is None:
                    result.errors += 1
                else:
                    result.samples.append(sample)

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    start = time.monotonic() + 0.05
    for i in range(total):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        slots.put((i, due))
    for _ in pool:
        slots.put(None)
    for thread in pool:
        thread.join(timeout=60)
    result.wall = time.perf_counter() - wall0
    result.client_cpu = time.process_time() - cpu0
    return result


def raw_ceiling(
    *, port: int, path: str, threads: int, total: int, request: Callable[[int], tuple]
) -> tuple[float, float]:
    """A plain pooled urllib3 client (keep-alive) posting to the receiver:
    returns (requests/s, client CPU µs per request)."""
    import urllib3

    pool = urllib3.HTTPConnectionPool(HOST, port, maxsize=threads, block=True)
    counter = itertools.count()
    failures: list[int] = []

    def worker() -> None:
        while (i := next(counter)) < total:
            body, headers = request(i)
            response = pool.urlopen(
                "POST", path, body=body, headers=headers, retries=False, redirect=False
            )
            if response.status != 200:
                failures.append(response.status)

    for i in range(threads * 2):  # open the connections first
        body, headers = request(total + i)
        pool.urlopen("POST", path + "-warmup", body=body, headers=headers, retries=False)
    workers = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    pool.close()
    if failures:
        raise RuntimeError(f"raw client got {len(failures)} non-200 answers")
    return total / wall, cpu / total * 1e6
