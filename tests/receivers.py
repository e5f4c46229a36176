"""Real local HTTP receivers for tests: they record every request and answer as told."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    at: float  # time.time() when the request arrived
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    peer: str = ""  # the address the request came from (a proxy's, through one)


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (a slow or hanging endpoint)


Behaviour = Callable[[Received, int], Answer]  # (request, how many came before) -> answer


class _Server(ThreadingHTTPServer):
    # A connection that finds the accept queue full is dropped, and the sender's TCP tries
    # again a second later. With Python's default queue of 5, a busy test process made 4
    # of 10 concurrent webhooks arrive a second late (counted as sent after a circuit had
    # opened, in tests/e2e/test_circuit_breaker.py).
    request_queue_size = 128


class Receiver:
    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour: Behaviour = behaviour or (lambda request, n: Answer())
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.02)
        raise AssertionError(
            f"expected {count} requests within {timeout}s, got {len(self.requests)}"
        )

    def _record(self, request: Received) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests) - 1

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = Received(
                    at=time.time(),
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length),
                    peer=self.client_address[0],
                )
                answer = receiver.behaviour(request, receiver._record(request))
                if answer.delay:
                    time.sleep(answer.delay)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def most_at_once(starts: list[float], duration: float) -> int:
    """The most requests open at once, each held `duration` seconds from its arrival."""
    edges = sorted([(at, 1) for at in starts] + [(at + duration, -1) for at in starts])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most
