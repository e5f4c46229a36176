"""A hostile answer beside a healthy tenant: does it slow the healthy one's attempts?

Why: the review behind issue #31 found that a receiver answering `200` chunked, then one
endless trailer field, kept the worker's event loop busy for seconds (the parser built
the value with `bytes +=`), so every other tenant's attempts in that process stalled
(1 ms → 3.4 s). Every answer's bytes are now bounded in every phase.

    python -m bench.hostile_answers [--requests 3000] [--concurrency 10] [--hostile 4]

Two receivers run in a separate process (their CPU is not counted): a healthy one
answering `200 ok` on keep-alive, and a hostile one answering `200` chunked with an empty
body, then a trailer field that never ends (until the client closes, or 64 MB). On one
Sender (the worker's event loop), `--concurrency` coroutines post to the healthy one
while, in the second run, `--hostile` coroutines keep posting to the hostile one. It
prints the healthy attempts' p50/p99 latency in both runs, their difference (the
target: p99 within 20 ms) and how many failed, as one JSON line. Before the fix (run it
from a checkout of 864a3c6 or a55f9cf) the healthy attempts beside the hostile ones
timed out.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import multiprocessing
import statistics
import sys
import time
from typing import Any

HOST = "127.0.0.1"
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
HOSTILE_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Endless\r\n\r\n0\r\n"
HOSTILE_MOST = 64 * 1024 * 1024
BODY = json.dumps({"type": "order.paid", "data": {"amount": 4200}}).encode()


async def _serve_healthy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(OK)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _serve_hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HOSTILE_HEAD + b"X-Endless: ")
        chunk = b"a" * 65536
        for _ in range(HOSTILE_MOST // len(chunk)):
            writer.write(chunk)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _receivers(ports: multiprocessing.Queue[tuple[int, int]]) -> None:
    async def main() -> None:
        healthy = await asyncio.start_server(_serve_healthy, HOST, 0)
        hostile = await asyncio.start_server(_serve_hostile, HOST, 0)
        ports.put((_port(healthy), _port(hostile)))
        await asyncio.Event().wait()

    asyncio.run(main())


def _port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(
    sender: Any, healthy: str, hostile: str | None, args: argparse.Namespace
) -> dict[str, Any]:
    """The healthy attempts' latencies (ms), with `args.hostile` hostile ones always under
    way beside them when `hostile` is given."""
    latencies: list[float] = []
    failed: list[str | None] = []
    hostile_results: list[tuple[int | None, str | None]] = []
    left = args.requests

    async def one_healthy() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            started = time.perf_counter()
            result = await sender.post(url=healthy, body=BODY, headers={}, timeout=10)
            latencies.append((time.perf_counter() - started) * 1000)
            if result.status_code != 200:
                failed.append(result.error)

    async def one_hostile(done: asyncio.Event) -> None:
        while not done.is_set():
            result = await sender.post(url=hostile, body=BODY, headers={}, timeout=10)
            hostile_results.append((result.status_code, result.error))

    async def run() -> None:
        done = asyncio.Event()
        hostiles = [
            asyncio.ensure_future(one_hostile(done)) for _ in range(args.hostile if hostile else 0)
        ]
        await asyncio.sleep(0.2 if hostile else 0)  # the hostile answers are under way
        await asyncio.gather(*(one_healthy() for _ in range(args.concurrency)))
        done.set()
        await asyncio.gather(*hostiles)

    started = time.perf_counter()
    asyncio.run_coroutine_threadsafe(run(), sender.loop).result(timeout=600)
    return {
        "requests": len(latencies),
        "failed": len(failed),
        "first_failure": failed[0] if failed else None,
        "seconds": round(time.perf_counter() - started, 2),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(_percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
        "hostile_answers": len(hostile_results),
        "hostile_first": hostile_results[0] if hostile_results else None,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--hostile", type=int, default=4)
    args = parser.parse_args(argv)
    try:
        sender_module = importlib.import_module("deliveries.transport.sender")
    except ImportError:  # the code before the four rooms, for a before/after run
        sender_module = importlib.import_module("deliveries.sender")

    ports: multiprocessing.Queue[tuple[int, int]] = multiprocessing.Queue()
    receivers = multiprocessing.Process(target=_receivers, args=(ports,), daemon=True)
    receivers.start()
    healthy_port, hostile_port = ports.get(timeout=10)
    healthy = f"http://{HOST}:{healthy_port}/hooks"
    hostile = f"http://{HOST}:{hostile_port}/hooks"
    sender = sender_module.Sender(version="bench", allow_private_networks=True).start()
    try:
        measure(sender, healthy, None, argparse.Namespace(**{**vars(args), "requests": 300}))
        alone = measure(sender, healthy, None, args)
        beside = measure(sender, healthy, hostile, args)
    finally:
        sender.close()
        receivers.terminate()
    figures = {
        "alone": alone,
        "beside_hostile": beside,
        "p99_difference_ms": round(beside["p99_ms"] - alone["p99_ms"], 2),
        "target_ms": 20,
    }
    print("HOSTILE_JSON " + json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
