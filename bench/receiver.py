"""A fast webhook receiver for the benchmark, run in its own process.

    python -m bench.receiver PORT [PORT ...]

Raw asyncio HTTP/1.1 with keep-alive (the same approach as bench/http_clients.py):
it parses just enough to find the end of each request (Content-Length) and the
`webhook-id` header, answers `200 ok`, and records (webhook-id, time.monotonic()) in
memory. CLOCK_MONOTONIC is system-wide on Linux, so its times compare with the
orchestrator's.

Control routes (answered by the same server, never recorded):
- GET /_count  -> `<number of webhook requests recorded>`
- GET /_dump   -> JSON {"records": [[id, t], ...], "samples": [...], "cpu": seconds, "hung": n,
                   "bearers": [[path, authorization, count, first t, last t], ...]}
- POST /_reset -> forget everything recorded so far
The first few webhook requests are kept whole (`samples`) so the orchestrator can check
their signatures. `bearers` counts the recorded webhooks by path and Authorization
header value (empty when absent), with the first and last time each was seen: what the
OAuth2 step (steps_oauth.py) checks against the tokens its token server issued.

A request to a path under `/hang` plays a hanging endpoint: the connection is accepted
and the request read, but nothing is ever answered (the sender's timeout ends it). Such
requests are counted (`hung` in the dump), not recorded. Every PORT given is served the
same way (one record for all): a sender pools connections per host and port, so an
endpoint on a port of its own looks like another host to it.

A request to `/slow/SECONDS/...` plays a slow but healthy endpoint: `200 ok` after
SECONDS. Such requests are counted (`slow` in the dump, with the most open at once),
not recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import cast

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
SAMPLES = 3

records: list[tuple[str, float]] = []
samples: list[dict] = []
hung: list[float] = []  # when each request to /hang arrived
slow = {"requests": 0, "open": 0, "most_open": 0}  # requests to /slow/SECONDS/...
bearers: dict[tuple[str, str], list[float]] = {}  # (path, Authorization) -> [n, first, last]


def _answer(body: bytes, content_type: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + content_type
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _control(path: bytes) -> bytes:
    if path.startswith(b"/_count"):
        return _answer(str(len(records)).encode(), b"text/plain")
    if path.startswith(b"/_reset"):
        records.clear()
        samples.clear()
        hung.clear()
        bearers.clear()
        slow.update(requests=0, open=0, most_open=0)
        return _answer(b"0", b"text/plain")
    if path.startswith(b"/_dump"):
        cpu = sum(os.times()[:2])
        dump = {
            "records": records,
            "samples": samples,
            "cpu": cpu,
            "hung": len(hung),
            "slow": slow,
            "bearers": [[path, auth, *seen] for (path, auth), seen in bearers.items()],
        }
        return _answer(json.dumps(dump).encode())
    return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


class Protocol(asyncio.Protocol):
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
            lines = self.buffer[:end].split(b"\r\n")
            length = 0
            webhook_id = None
            authorization = b""
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"webhook-id":
                    webhook_id = value.strip().decode()
                elif name == b"authorization":
                    authorization = value.strip()
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            request, self.buffer = self.buffer[:total], self.buffer[total:]
            path = lines[0].split(b" ")[1] if b" " in lines[0] else b"/"
            if path.startswith(b"/_"):
                self.transport.write(_control(path))
                continue
            if path.startswith(b"/hang"):
                hung.append(time.monotonic())  # never answered: the sender's timeout ends it
                continue
            if path.startswith(b"/slow/"):
                self._answer_later(float(path.split(b"/")[2]))
                continue
            now = time.monotonic()
            records.append((webhook_id or "", now))
            key = (path.decode(errors="replace"), authorization.decode(errors="replace"))
            if (seen := bearers.get(key)) is None:
                bearers[key] = [1, now, now]
            else:
                seen[0] += 1
                seen[2] = now
            if len(samples) < SAMPLES:
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    headers[name.strip().decode().lower()] = value.strip().decode()
                samples.append({"headers": headers, "body": request[end + 4 :].decode()})
            self.transport.write(OK)

    def _answer_later(self, seconds: float) -> None:
        slow["requests"] += 1
        slow["open"] += 1
        slow["most_open"] = max(slow["most_open"], slow["open"])

        def answer() -> None:
            slow["open"] -= 1
            if not self.transport.is_closing():
                self.transport.write(OK)

        asyncio.get_running_loop().call_later(seconds, answer)


async def serve(ports: list[int]) -> None:
    loop = asyncio.get_running_loop()
    servers = [
        await loop.create_server(Protocol, "127.0.0.1", port, backlog=1024) for port in ports
    ]
    print(f"receiver listening on 127.0.0.1:{', '.join(map(str, ports))}", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    asyncio.run(serve([int(port) for port in sys.argv[1:]]))
