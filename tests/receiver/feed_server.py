"""A real HTTP server that answers the catch-up feed as CONTRACT.md section 2 says.

It serves ``GET /api/v1/endpoints/<id>/messages?after=N&limit=L`` from a list of
messages, checks the bearer key, and can be told to misbehave first (``trouble``):
answer a status, drop the connection, or stall past the client's timeout.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

API_KEY = "hom_alice_key"
ENDPOINT_ID = "ep_alice"


def make_message(sequence: int) -> dict[str, Any]:
    return {
        "sequence": sequence,
        "event_id": f"evt_{sequence:04d}_{uuid.uuid4().hex[:8]}",
        "type": "order.shipped",
        "created_at": "2026-11-25T10:00:00Z",
        "ordering_key": None,
        "data": {"order": f"ord_{sequence}"},
        "delivery_id": f"dlv_{sequence}",
        "status": "succeeded",
    }


@dataclass
class Trouble:
    """One misbehaving answer: ``status`` with ``body``, or ``drop``, or ``stall`` seconds."""

    status: int = 0
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    stall: float = 0.0


class FeedServer:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.oldest_sequence = 1
        self.trouble: list[Trouble] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        # A short poll keeps shutdown() (every test's teardown) quick.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def root_url(self) -> str:
        """The server's root, as homing_client.Client takes it."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        """The API root (which Feed also accepts)."""
        return f"{self.root_url}/api/v1"

    def start(self) -> FeedServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def answer(self, path: str, headers: Any) -> Trouble:
        with self._lock:
            url = urlsplit(path)
            query = parse_qs(url.query)
            self.requests.append(
                {
                    "path": url.path,
                    "query": {k: v[0] for k, v in query.items()},
                    "authorization": headers.get("Authorization"),
                }
            )
            if self.trouble:
                return self.trouble.pop(0)
        if headers.get("Authorization") != f"Bearer {API_KEY}":
            return Trouble(401, {"message": "Invalid API key"})
        if url.path != f"/api/v1/endpoints/{ENDPOINT_ID}/messages":
            return Trouble(404, {"message": "Not found"})
        after, limit = int(query["after"][0]), int(query["limit"][0])
        if after < self.oldest_sequence - 1:
            return Trouble(
                410,
                {
                    "message": f"Messages before {self.oldest_sequence} are gone",
                    "oldest_sequence": self.oldest_sequence,
                },
            )
        rest = [m for m in self.messages if m["sequence"] > after]
        page = rest[:limit]
        next_after = page[-1]["sequence"] if page else after
        return Trouble(200, {"results": page, "next_after": next_after, "done": len(rest) <= limit})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer = server.answer(self.path, self.headers)
                if answer.stall:
                    time.sleep(answer.stall)
                if answer.drop:
                    # Close without a byte of answer: the client sees the connection drop.
                    self.close_connection = True
                    return
                raw = (
                    answer.body
                    if isinstance(answer.body, bytes)
                    else json.dumps(answer.body).encode()
                )
                self.send_response(answer.status or 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler
