"""The two sides of an outbox e2e test, all real processes on the test PostgreSQL server.

- Homing's API under gunicorn (on pytest-django's test database), which can be stopped
  and started again on the same port.
- The producer app (tests/client/producer_app) under gunicorn, on a database of its own,
  and its `homing_relay` processes.
- A recording proxy between relay and Homing: it logs every POST (Idempotency-Key,
  status) and can hold Homing's answer back, so a test can kill the relay after Homing
  committed an event but before the relay heard about it; it can also answer a 5xx in
  Homing's place, for one row (`fail_keys`) or for everything (`outage`).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg

from tests.harness import free_port
from tests.processes import Process, wait_until

PRODUCER_SETTINGS = "tests.client.producer_app.settings"


class Server:
    """A gunicorn server that keeps its port across stop() and start()."""

    def __init__(self, name: str, wsgi: str, log_dir: Path, **env: str) -> None:
        self.name, self.wsgi, self.log_dir, self.env = name, wsgi, log_dir, env
        self.address = f"127.0.0.1:{free_port()}"
        self.url = f"http://{self.address}"
        self.process: Process | None = None

    def start(self) -> Server:
        self.process = Process(
            self.name,
            [
                sys.executable,
                "-m",
                "gunicorn",
                self.wsgi,
                "--bind",
                self.address,
                "--workers",
                "2",
                "--threads",
                "4",
            ],
            self.log_dir,
            **self.env,
        )
        wait_until(self._listening, timeout=30, message=f"{self.name} down:\n{self.log()}")
        return self

    def _listening(self) -> bool:
        try:
            httpx.get(self.url + "/", timeout=1)
        except httpx.TransportError:
            return False
        return True

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def log(self) -> str:
        path = self.log_dir / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass(frozen=True)
class Forwarded:
    key: str
    status: int | None  # None: Homing could not be reached, the connection was dropped
    replayed: bool


class RecordingProxy:
    """Forwards POSTs (and GET /healthz) to Homing and records the POSTs; `hold` delays
    Homing's answer; `fail_keys` (Idempotency-Key -> status) and `outage` (a status for
    every request) answer in Homing's place without forwarding."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.hold = 0.0
        self.fail_keys: dict[str, int] = {}
        self.outage: int | None = None
        self.forwarded: list[Forwarded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def sent_keys(self) -> list[str]:
        """Keys of the POSTs Homing answered 202 to, in order, replays included."""
        with self._lock:
            return [f.key for f in self.forwarded if f.status == 202]

    def _record(self, method: str, forwarded: Forwarded) -> None:
        if method != "POST":
            return  # GET /healthz: not a row sent
        with self._lock:
            self.forwarded.append(forwarded)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.do_POST()

            def _answer_instead(self, key: str, status: int) -> None:
                proxy._record(self.command, Forwarded(key, status, False))
                answer = b'{"message": "Internal error (the test proxy)"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                key = self.headers.get("Idempotency-Key", "")
                instead = proxy.outage or proxy.fail_keys.get(key)
                if instead:
                    self._answer_instead(key, instead)
                    return
                upstream = http.client.HTTPConnection(proxy.upstream.netloc, timeout=30)
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    answer = response.read()
                except OSError:
                    # Homing is down: drop the connection, as if there were no proxy.
                    proxy._record(self.command, Forwarded(key, None, False))
                    self.close_connection = True
                    return
                finally:
                    upstream.close()
                proxy._record(
                    self.command,
                    Forwarded(
                        key, response.status, response.getheader("Idempotent-Replayed") == "true"
                    ),
                )
                time.sleep(proxy.hold)
                with contextlib.suppress(OSError):  # the relay may have been killed meanwhile
                    self.send_response(response.status)
                    self.send_header("Content-Type", response.getheader("Content-Type", ""))
                    if retry_after := response.getheader("Retry-After"):
                        self.send_header("Retry-After", retry_after)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


class Producer:
    """The producer app, its database and its relays."""

    def __init__(self, dsn: str, web: Server, log_dir: Path) -> None:
        self.dsn, self.web, self.log_dir = dsn, web, log_dir
        self.relays: list[Process] = []

    def reset(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE orders, homing_client_outboxevent RESTART IDENTITY")

    def create_orders(self, **spec: object) -> httpx.Response:
        return httpx.post(self.web.url + "/orders/", json=spec, timeout=10)

    def outbox_age(self) -> float:
        answer = httpx.get(self.web.url + "/outbox-age/", timeout=10).json()
        return answer["homing_outbox_oldest_age_seconds"]

    def rows(self) -> list[dict]:
        with (
            psycopg.connect(self.dsn) as conn,
            conn.cursor(row_factory=psycopg.rows.dict_row) as cur,
        ):
            cur.execute(
                "SELECT id, type, data, status, attempts, last_error, event_id"
                " FROM homing_client_outboxevent ORDER BY created_at, id"
            )
            return cur.fetchall()

    def all_sent(self, count: int) -> bool:
        """Exactly `count` outbox rows, every one sent."""
        rows = self.rows()
        return len(rows) == count and all(row["status"] == "sent" for row in rows)

    def orders(self) -> list[int]:
        with psycopg.connect(self.dsn) as conn:
            return [row[0] for row in conn.execute("SELECT id FROM orders ORDER BY id")]

    def start_relay(self, homing_url: str, api_key: str, *args: str, **env: str) -> Process:
        relay = Process(
            f"relay{len(self.relays)}",
            [
                sys.executable,
                "-m",
                "django",
                "homing_relay",
                "--poll-interval",
                "1",
                "--max-backoff",
                "1",
                *args,
            ],
            self.log_dir,
            DJANGO_SETTINGS_MODULE=PRODUCER_SETTINGS,
            PRODUCER_DATABASE_URL=self.dsn,
            HOMING_URL=homing_url,
            HOMING_API_KEY=api_key,
            **env,
        )
        self.relays.append(relay)
        wait_until(lambda: "homing_relay: started" in relay.log(), timeout=20, message=relay.log())
        return relay

    def stop_relays(self) -> None:
        for relay in self.relays:
            relay.stop()


def create_database(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def port_is_closed(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port or 80), timeout=0.5).close()
    except OSError:
        return True
    return False
