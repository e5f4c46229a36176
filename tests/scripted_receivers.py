"""A real HTTP/1.1 server on 127.0.0.1 whose answers a test scripts, request by request,
on the raw socket: keep-alive, trickles, floods and malformed bytes included."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO


@dataclass
class Request:
    connection: int  # which TCP connection carried it
    method: str
    path: str
    header_lines: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.header_lines if k.lower() == name.lower()]


# A behaviour answers one request on a raw socket; returning False closes the connection.
Behaviour = Callable[[socket.socket, Request, "Receiver"], bool]


@dataclass
class Receiver:
    """A real HTTP/1.1 server on 127.0.0.1 that records exactly what it was sent."""

    behaviour: Behaviour
    on_connect: Callable[[socket.socket], None] | None = None
    tls: ssl.SSLContext | None = None  # serve HTTPS with this server-side context
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    peers: list[str] = field(default_factory=list)  # each connection's remote address
    bytes_written: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    handlers_done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Receiver:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.stop.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, peer = self.listener.accept()
            except OSError:
                return
            self.peers.append(peer[0])
            self.connections += 1
            threading.Thread(target=self._serve, args=(sock, self.connections), daemon=True).start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
            with sock:
                if self.on_connect:
                    self.on_connect(sock)
                    return
                # Closed here, not when the frame goes: the socket's descriptor stays
                # open while its file object does, and `handlers_done` promises a close.
                with sock.makefile("rb") as reader:
                    while (request := read_request(reader, number)) is not None:
                        self.requests.append(request)
                        if not self.behaviour(sock, request, self):
                            return
        except OSError:
            pass  # the client went away: that is what several tests expect
        finally:
            self.handlers_done.set()


def read_request(reader: BinaryIO, connection: int) -> Request | None:
    line = reader.readline()
    if not line:
        return None
    method, path, _ = line.decode().split(" ", 2)
    headers = []
    while (raw := reader.readline().decode()) not in ("\r\n", ""):
        name, _, value = raw.partition(":")
        headers.append((name.strip(), value.strip()))
    length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
    body = reader.read(length)
    return Request(connection, method, path, headers, body)


def response(status: int, body: bytes = b"ok", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def answer(status: int, body: bytes = b"ok", **headers: str) -> Behaviour:
    def behaviour(sock: socket.socket, request: Request, receiver: Receiver) -> bool:
        sock.sendall(response(status, body, {k.replace("_", "-"): v for k, v in headers.items()}))
        return True

    return behaviour


def hang(sock: socket.socket, request: Request, receiver: Receiver) -> bool:
    receiver.stop.wait(30)
    return False


def answer_client_name(sock: socket.socket, request: Request, receiver: Receiver) -> bool:
    """200 with the common name of the client certificate this connection presented (a
    receiver whose TLS context requires one: mutual TLS)."""
    assert isinstance(sock, ssl.SSLSocket)
    subject: Any = (sock.getpeercert() or {}).get("subject", ())  # ((("commonName", "x"),),)
    names = [value for rdn in subject for key, value in rdn if key == "commonName"]
    sock.sendall(response(200, names[0].encode() if names else b""))
    return True
