"""What the egress proxy costs the worker: CPU per POST through tinyproxy vs direct.

Why: with HOMING_EGRESS_PROXY every connection is a CONNECT tunnel (DESIGN.md decision
23). A tunnel is opened once and kept alive like a direct connection, so a POST on it
should cost the sending process about what a direct one does: the target is at most
1.3x the direct CPU per POST.

    python -m bench.proxy_cost [--requests 5000] [--concurrency 10] [--pairs 2]

The receiver (bench/http_clients.py's raw asyncio one, `200 ok` on keep-alive) and
Debian's tinyproxy (tests/proxies.py) run in other processes, so only the sender's CPU
is counted: time.process_time() of this process around `--requests` POSTs from
`--concurrency` coroutines on one Sender (the worker's event loop), after a warm-up that
opens the connections (the tunnels). Runs go direct, proxied, proxied, direct
(`--pairs` times) to even out a busy machine's drift. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.http_clients import BODY, HEADERS, HOST, PATH, start_receiver

TARGET_RATIO = 1.3


def cpu_per_post(sender: Any, url: str, requests: int, concurrency: int) -> float:
    """CPU µs of this process per POST, `requests` POSTs from `concurrency` coroutines."""
    headers = {k: v for k, v in HEADERS.items() if k.startswith("webhook-")}

    async def posts(total: int) -> None:
        async def client(count: int) -> None:
            for _ in range(count):
                result = await sender.post(url=url, body=BODY, headers=headers, timeout=10)
                if result.status_code != 200:
                    raise RuntimeError(f"unexpected result {result}")

        await asyncio.gather(*(client(total // concurrency) for _ in range(concurrency)))

    def run(total: int) -> None:
        asyncio.run_coroutine_threadsafe(posts(total), sender.loop).result()

    run(concurrency * 10)  # warm up: open the connections (through the proxy: the tunnels)
    cpu0 = time.process_time()
    run(requests)
    return (time.process_time() - cpu0) / requests * 1e6


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args(argv)

    from deliveries.transport.proxy import parse_proxy
    from deliveries.transport.sender import Sender
    from tests.proxies import TinyProxy

    receiver, port = start_receiver()
    url = f"http://{HOST}:{port}{PATH}"
    folder = Path(tempfile.mkdtemp(prefix="homing-proxy-bench-"))
    proxy = TinyProxy(folder).start()
    direct = Sender(version="bench", allow_private_networks=True).start()
    proxied = Sender(
        version="bench", allow_private_networks=True, proxy=parse_proxy(proxy.url)
    ).start()
    figures: dict[str, list[float]] = {"direct": [], "proxied": []}
    try:
        for _ in range(args.pairs):
            for name in ("direct", "proxied", "proxied", "direct"):
                sender = direct if name == "direct" else proxied
                cost = cpu_per_post(sender, url, args.requests, args.concurrency)
                figures[name].append(round(cost, 1))
        tunnels = proxy.log().count("): CONNECT ")  # one line per CONNECT request
    finally:
        direct.close()
        proxied.close()
        proxy.stop()
        receiver.terminate()
    ratio = statistics.median(figures["proxied"]) / statistics.median(figures["direct"])
    result = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "direct_cpu_us_per_post": figures["direct"],
        "proxied_cpu_us_per_post": figures["proxied"],
        "ratio_of_medians": round(ratio, 2),
        "target_ratio": TARGET_RATIO,
        "tunnels_opened": tunnels,
    }
    print("PROXY_COST_JSON " + json.dumps(result))
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
