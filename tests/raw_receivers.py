"""A receiver that writes raw bytes: answers no HTTP library would produce."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class RawReceiver:
    """Answers each request with `answer(path)` bytes, verbatim, then closes."""

    def __init__(self, answer: Callable[[str], bytes]) -> None:
        self.answer = answer
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(body) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    body += chunk
                self.requests += 1
                path = head.split(b" ")[1].decode()
                conn.sendall(self.answer(path))
            except OSError:
                return
