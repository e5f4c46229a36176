"""A real local OAuth2 token server and a receiver that wants its bearer tokens.

The token server answers the client-credentials grant (RFC 6749 section 4.4) when the
client authenticates (HTTP Basic or the form) with the expected id and secret, counts
every fetch, and can be told to fail. `BearerReceiver` accepts a webhook only with the
token the server issued last (a rotated token makes it answer 401).
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote


class TokenServer:
    def __init__(self, client_id: str = "homing", client_secret: str = "s3cr3t") -> None:
        self.client_id, self.client_secret = client_id, client_secret
        self.expires_in: int | None = 3600
        self.fail_with: int | None = None  # answer this status instead of a token
        self.fetches = 0
        self.forms: list[dict[str, str]] = []
        self.current = ""
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/oauth/token"

    def start(self) -> TokenServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def rotate(self) -> None:
        """Issue a new token from now on: the receiver refuses the old one."""
        with self._lock:
            self.current = f"tok-{next(self._numbers)}-rotated"

    def _issue(self, form: dict[str, str], basic: tuple[str, str] | None) -> tuple[int, bytes]:
        with self._lock:
            self.fetches += 1
            self.forms.append(form)
            if self.fail_with is not None:
                return self.fail_with, b'{"error":"temporarily_unavailable"}'
            client = basic or (form.get("client_id", ""), form.get("client_secret", ""))
            if form.get("grant_type") != "client_credentials":
                return 400, b'{"error":"unsupported_grant_type"}'
            if client != (self.client_id, self.client_secret):
                return 401, b'{"error":"invalid_client"}'
            if not self.current:
                self.current = f"tok-{next(self._numbers)}"
            answer: dict[str, object] = {"access_token": self.current, "token_type": "Bearer"}
            if self.expires_in is not None:
                answer["expires_in"] = self.expires_in
            return 200, json.dumps(answer).encode()

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
                status, answer = server._issue(form, basic)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def bearer_behaviour(tokens: TokenServer):
    """A tests.receivers behaviour: 200 with the current token, 401 otherwise."""
    from tests.receivers import Answer

    def behaviour(request, n):
        if request.headers.get("authorization") == f"Bearer {tokens.current}":
            return Answer(200, b"ok")
        return Answer(401, b"bad token")

    return behaviour
