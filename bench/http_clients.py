"""CPU cost and throughput of Python HTTP clients posting webhooks over keep-alive.

Why: DESIGN.md decision 4 — on a 2-core box the whole pipeline has ~2 ms of CPU per
delivery, so the HTTP client's CPU per POST decides how fast Homing can go.

Run from the repo root:  python bench/http_clients.py [--requests 5000]
    or, coroutines on one event loop as the worker sends:  --coroutines 50 --requests 20000

A raw asyncio receiver runs in a separate process (so its CPU is not counted) and
answers every request with `200 ok` on a keep-alive connection. The client side is
measured with time.process_time(), which sums the CPU of every thread in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.process import BaseProcess
from typing import cast

HOST = "127.0.0.1"
PATH = "/hooks/bench"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
BODY = json.dumps(
    {
        "id": "evt_2hRfXk3vBq9yTzL0pW8mN4sA",
        "type": "order.paid",
        "timestamp": "2024-05-01T12:00:00.000000Z",
        "data": {
            "order_id": "ord_1234567890",
            "amount": 4200,
            "currency": "EUR",
            "customer": {"id": "cus_0987654321", "email": "alice@example.com"},
            "items": [{"sku": "SKU-1", "qty": 2}, {"sku": "SKU-2", "qty": 1}],
        },
    },
    separators=(",", ":"),
).encode()
HEADERS = {
    "Content-Type": "application/json",
    "User-Agent": "Homing/bench",
    "webhook-id": "evt_2hRfXk3vBq9yTzL0pW8mN4sA",
    "webhook-timestamp": "1714564800",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}


# --- receiver -------------------------------------------------------------------


class _Receiver(asyncio.Protocol):
    """Just enough HTTP/1.1: header block, Content-Length body, pipelining-safe."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A TCP server's connections: their transports write (asyncio types the base).
        self.transport = cast(asyncio.Transport, transport)
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            self.transport.write(RESPONSE)


def _serve(sock: socket.socket) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Receiver, sock=sock, backlog=512)
        await server.serve_forever()

    asyncio.run(main())


def start_receiver() -> tuple[BaseProcess, int]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    sock.listen(512)
    port = sock.getsockname()[1]
    proc = multiprocessing.get_context("fork").Process(target=_serve, args=(sock,), daemon=True)
    proc.start()
    sock.close()  # the child owns the listening socket now
    return proc, port


# --- clients: each factory returns a thread-safe `post()` ---------------------------


def make_requests(port: int, threads: int) -> Callable[[], int]:
    import requests
    from requests.adapters import HTTPAdapter

    session = requests.Session()
    session.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=threads))
    url = f"http://{HOST}:{port}{PATH}"

    def post() -> int:
        return session.post(url, data=BODY, headers=HEADERS, allow_redirects=False).status_code

    return post


def make_urllib3(port: int, threads: int) -> Callable[[], int]:
    import urllib3

    pool = urllib3.HTTPConnectionPool(HOST, port, maxsize=threads, block=False)

    def post() -> int:
        resp = pool.urlopen("POST", PATH, body=BODY, headers=HEADERS, retries=False, redirect=False)
        return resp.status

    return post


def make_http_client(port: int, threads: int) -> Callable[[], int]:
    # http.client connections are not thread-safe: one per thread.
    local = threading.local()

    def post() -> int:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(HOST, port, timeout=10)
        conn.request("POST", PATH, body=BODY, headers=HEADERS)
        resp = conn.getresponse()
        resp.read()
        return resp.status

    return post


def make_homing_sender(port: int, threads: int) -> Callable[[], int]:
    # Homing's own transport (aiohttp on its event-loop thread, bounded read).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from deliveries.transport.sender import Sender

    sender = Sender(version="bench", allow_private_networks=True).start()
    url = f"http://{HOST}:{port}{PATH}"
    extra = {k: v for k, v in HEADERS.items() if k.startswith("webhook-")}

    def post() -> int:
        result = sender.send(url=url, body=BODY, headers=extra, timeout=10)
        return result.status_code or 0

    return post


CLIENTS: dict[str, Callable[[int, int], Callable[[], int]]] = {
    "requests.Session": make_requests,
    "urllib3 pool": make_urllib3,
    "http.client": make_http_client,
    "homing Sender": make_homing_sender,
}


def run(post: Callable[[], int], total: int, threads: int) -> tuple[float, float]:
    """Return (CPU µs per request, requests per second)."""
    for _ in range(threads * 4):  # warm up: open the connections, fill caches
        post()
    per_thread = total // threads

    def worker() -> None:
        for _ in range(per_thread):
            if post() != 200:
                raise RuntimeError("unexpected status")

    cpu0, wall0 = time.process_time(), time.perf_counter()
    if threads == 1:
        worker()
    else:
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(worker) for _ in range(threads)]:
                future.result()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    done = per_thread * threads
    return cpu / done * 1e6, done / wall


# --- on one event loop: coroutines, as the worker sends ----------------------------


async def _aiohttp_posts(port: int, total: int, concurrency: int) -> None:
    import aiohttp

    url = f"http://{HOST}:{port}{PATH}"
    async with aiohttp.ClientSession(
        auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:

        async def client(count: int) -> None:
            for _ in range(count):
                async with session.post(
                    url, data=BODY, headers=HEADERS, allow_redirects=False
                ) as response:
                    await response.content.read(4096)
                    if response.status != 200:
                        raise RuntimeError("unexpected status")

        await asyncio.gather(*(client(total // concurrency) for _ in range(concurrency)))


def loop_clients(port: int, total: int, concurrency: int) -> dict[str, tuple[float, float]]:
    """CPU µs per POST and POSTs/s with `concurrency` coroutines on one uvloop loop: a
    plain aiohttp client against Homing's Sender (deliveries/transport/http1.py underneath)."""
    import uvloop

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from deliveries.transport.sender import Sender

    sender = Sender(version="bench", allow_private_networks=True).start()
    url = f"http://{HOST}:{port}{PATH}"
    extra = {k: v for k, v in HEADERS.items() if k.startswith("webhook-")}

    async def homing_posts(count: int) -> None:
        async def client(n: int) -> None:
            for _ in range(n):
                result = await sender.post(url=url, body=BODY, headers=extra, timeout=10)
                if result.status_code != 200:
                    raise RuntimeError(f"unexpected result {result}")

        await asyncio.gather(*(client(count // concurrency) for _ in range(concurrency)))

    def timed(run: Callable[[int], None]) -> tuple[float, float]:
        run(concurrency * 10)  # warm up: open the connections
        cpu0, wall0 = time.process_time(), time.perf_counter()
        run(total)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        return cpu / total * 1e6, total / wall

    try:
        return {
            "aiohttp (uvloop)": timed(lambda n: uvloop.run(_aiohttp_posts(port, n, concurrency))),
            "homing Sender": timed(
                lambda n: asyncio.run_coroutine_threadsafe(homing_posts(n), sender.loop).result()
            ),
        }
    finally:
        sender.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 16])
    parser.add_argument(
        "--coroutines",
        type=int,
        default=0,
        help="instead: this many coroutines on one event loop, aiohttp against Homing's Sender",
    )
    args = parser.parse_args()
    if args.coroutines:
        proc, port = start_receiver()
        time.sleep(0.3)
        try:
            print(f"{args.coroutines} coroutines on one uvloop loop, {args.requests} POSTs")
            for name, (cpu_us, rate) in loop_clients(port, args.requests, args.coroutines).items():
                print(f"{name:<18} {cpu_us:>8.0f} CPU µs/req {rate:>9.0f} req/s")
        finally:
            proc.terminate()
            proc.join()
        return

    proc, port = start_receiver()
    time.sleep(0.3)
    try:
        print(
            f"{len(BODY)}-byte JSON body, {args.requests} POSTs per run, keep-alive, "
            f"{os.cpu_count()} CPUs"
        )
        print(f"{'client':<18} {'threads':>7} {'CPU µs/req':>11} {'req/s':>9}")
        for name, factory in CLIENTS.items():
            for threads in args.threads:
                try:
                    post = factory(port, threads)
                except ImportError as exc:
                    print(f"{name:<18} skipped ({exc})")
                    break
                cpu_us, rate = run(post, args.requests, threads)
                print(f"{name:<18} {threads:>7} {cpu_us:>11.0f} {rate:>9.0f}")
    finally:
        proc.terminate()
        proc.join()


if __name__ == "__main__":
    main()
