"""Ceilings: how fast a plain aiohttp client posts to a receiver on this machine.

The worker's drain rate is quoted as a share of this: one process, one event loop, the
same number of requests in flight as a worker process (HOMING_SEND_CONCURRENCY), the
same small JSON body, no signing, no database. `make bench` can print it beside the
drain rate ("aiohttp ceiling").

    python -m bench.ceilings http://127.0.0.1:8080/hook --seconds 5 --concurrency 400
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp
import uvloop

BODY = b'{"type":"bench.ceiling","timestamp":"2026-01-01T00:00:00Z","data":{"n":1}}'


async def _post_for(url: str, seconds: float, concurrency: int) -> tuple[int, int]:
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    ok = failed = 0
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:

        async def client() -> None:
            nonlocal ok, failed
            while time.monotonic() < deadline:
                try:
                    async with session.post(
                        url,
                        data=BODY,
                        headers={"Content-Type": "application/json"},
                        allow_redirects=False,
                        timeout=aiohttp.ClientTimeout(total=10),
                    ) as response:
                        await response.content.read(4096)
                        ok += 200 <= response.status < 300
                        failed += not 200 <= response.status < 300
                except (TimeoutError, aiohttp.ClientError, OSError):
                    failed += 1

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return ok, failed


def aiohttp_ceiling(
    url: str, *, seconds: float = 5.0, concurrency: int = 400, loop: str = "asyncio"
) -> float:
    """Successful POSTs per second a plain aiohttp client achieves against `url`, on
    asyncio's own event loop or on uvloop (the worker's sender runs on uvloop)."""
    run = uvloop.run if loop == "uvloop" else asyncio.run
    started = time.monotonic()
    ok, _ = run(_post_for(url, seconds, concurrency))
    return ok / (time.monotonic() - started)


def homing_sender_rate(url: str, *, seconds: float = 5.0, concurrency: int = 400) -> float:
    """The same loop through Homing's Sender (its checks, headers and bounded read), on
    the Sender's own event-loop thread: what the transport costs against plain aiohttp."""
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from deliveries.transport.sender import Sender

    sender = Sender(version="bench", allow_private_networks=True).start()
    ok = 0
    deadline = time.monotonic() + seconds

    async def client() -> None:
        nonlocal ok
        while time.monotonic() < deadline:
            result = await sender.post(url=url, body=BODY, headers={}, timeout=10)
            ok += result.status_code is not None and 200 <= result.status_code < 300

    async def all_clients() -> None:
        await asyncio.gather(*(client() for _ in range(concurrency)))

    started = time.monotonic()
    try:
        asyncio.run_coroutine_threadsafe(all_clients(), sender.loop).result()
    finally:
        sender.close()
    return ok / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=400)
    parser.add_argument("--sender", action="store_true", help="also time Homing's Sender")
    args = parser.parse_args()
    for loop in ("asyncio", "uvloop"):
        rate = aiohttp_ceiling(
            args.url, seconds=args.seconds, concurrency=args.concurrency, loop=loop
        )
        print(f"aiohttp ceiling ({loop}): {rate:,.0f} requests/s")
    if args.sender:
        rate = homing_sender_rate(args.url, seconds=args.seconds, concurrency=args.concurrency)
        print(f"homing Sender:   {rate:,.0f} requests/s")


if __name__ == "__main__":
    main()
