"""The OAuth2 step's token server (steps_oauth.py), in the bench process.

It answers the client-credentials grant for the clients it was given, as a real
authorisation server does: every fetch issues a new token, valid for `expires_in`
seconds from then. It keeps every token issued (its client, when, which worker process
asked) so that the step can check each bearer the receiver saw, and count fetches per
endpoint and per worker process. tests/token_server.py serves the tests' single client
with one token until told to rotate it; this step needs a token per fetch, issue times
and the asking process.

Which process asked is read from /proc: the socket whose local address is the request's
peer, found among the file descriptors of the processes in a watched worker's process
group (procs.Managed starts each in a session of its own; the Celery child stays in it).
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote


@dataclass(frozen=True)
class Issued:
    client_id: str
    token: str
    at: float  # time.monotonic() when it was issued (system-wide, like the receiver's)
    worker: str  # the watched worker whose process group asked; "?" if none matched


class TokenServer:
    def __init__(self, *, clients: dict[str, str], expires_in: int) -> None:
        self.clients = clients  # client_id -> client_secret
        self.expires_in = expires_in
        self.issued: list[Issued] = []
        self.refused = 0  # requests with wrong credentials or grant
        self._groups: dict[int, str] = {}  # process group id -> worker name
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/oauth/token"

    def start(self) -> TokenServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def watch(self, workers: dict[str, int]) -> None:
        """Attribute fetches to these workers (name -> the pid leading its group)."""
        with self._lock:
            self._groups.update({pid: name for name, pid in workers.items()})

    def _issue(self, form: dict[str, str], basic: tuple[str, str] | None, peer: int) -> bytes:
        client_id, secret = basic or (form.get("client_id", ""), form.get("client_secret", ""))
        if form.get("grant_type") != "client_credentials" or self.clients.get(client_id) != secret:
            with self._lock:
                self.refused += 1
            return b""
        worker = _asking_worker(peer, self.port, self._groups)
        token = f"{client_id}.{secrets.token_urlsafe(12)}"
        with self._lock:
            self.issued.append(Issued(client_id, token, time.monotonic(), worker))
        return (
            f'{{"access_token":"{token}","token_type":"Bearer",'
            f'"expires_in":{self.expires_in}}}'.encode()
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
                basic = None
                header = self.headers.get("Authorization", "")
                if header.startswith("Basic "):
                    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                    basic = (unquote(user), unquote(password))
                answer = server._issue(form, basic, self.client_address[1])
                self.send_response(200 if answer else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _asking_worker(peer_port: int, server_port: int, groups: dict[int, str]) -> str:
    """The watched worker owning the client end of 127.0.0.1:peer_port -> server_port."""
    inode = _socket_inode(peer_port, server_port)
    if inode is None:
        return "?"
    target = f"socket:[{inode}]"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # Field 5 of stat (after the parenthesised command name) is the process group.
            group = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2])
            if group not in groups:
                continue
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) == target:
                        return groups[group]
    return "?"


def _socket_inode(local_port: int, remote_port: int) -> int | None:
    # /proc/net/tcp: "sl local rem st ...", addresses as little-endian hex IP:port; the
    # inode is the tenth column.
    local = f"0100007F:{local_port:04X}"
    remote = f"0100007F:{remote_port:04X}"
    with open("/proc/net/tcp") as table:
        for line in table:
            fields = line.split()
            if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                return int(fields[9])
    return None
