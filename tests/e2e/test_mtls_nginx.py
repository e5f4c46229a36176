"""Mutual TLS against nginx with `ssl_verify_client on` and a CA the test makes: a real
worker presents alice's endpoint certificate and the webhook is delivered; her endpoint
without one is refused by nginx (HTTP 400) and never reaches the receiver behind it."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.certificates import Authority
from tests.factories import endpoint_via_api, event_via_api
from tests.processes import wait_until

NGINX = shutil.which("nginx", path="/usr/sbin:/usr/bin")

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not NGINX, reason="no nginx")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def authority() -> Authority:
    return Authority()


@pytest.fixture
def nginx_mtls(tmp_path: Path, authority: Authority, receiver_factory) -> Iterator[tuple]:
    """nginx on https://127.0.0.1:<port> requiring a client certificate of `authority`,
    passing the client's subject on to a receiver in X-Client-Subject."""
    receiver = receiver_factory()
    upstream = receiver.url.rsplit("/", 1)[0]
    certificate, key = authority.issue("127.0.0.1", server=True)
    for name, text in [("server.pem", certificate), ("key.pem", key), ("ca.pem", authority.ca_pem)]:
        (tmp_path / name).write_text(text)
    # The port is free when chosen, but another parallel test may take it before nginx
    # binds it: then nginx gives up and exits, and a new port is tried. (Connecting to the
    # port proves nothing then: it answers, someone else's.)
    for _ in range(5):
        port = free_port()
        process = _start_nginx(tmp_path, port, upstream)
        if _nginx_listening(process, port, tmp_path):
            break
    else:
        raise AssertionError(f"nginx did not start:\n{(tmp_path / 'error.log').read_text()}")
    try:
        yield f"https://127.0.0.1:{port}", tmp_path / "ca.pem", receiver
    finally:
        _stop(process)


def _start_nginx(tmp_path: Path, port: int, upstream: str) -> subprocess.Popen[bytes]:
    user = "user root;" if os.geteuid() == 0 else ""  # workers must reach our temp folders
    (tmp_path / "nginx.pid").unlink(missing_ok=True)
    config = tmp_path / "nginx.conf"
    config.write_text(
        f"""{user}
daemon off;
pid {tmp_path / "nginx.pid"};
error_log {tmp_path / "error.log"} info;
events {{ worker_connections 64; }}
http {{
    access_log {tmp_path / "access.log"};
    client_body_temp_path {tmp_path / "body"};
    proxy_temp_path {tmp_path / "proxy"};
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {tmp_path / "server.pem"};
        ssl_certificate_key {tmp_path / "key.pem"};
        ssl_client_certificate {tmp_path / "ca.pem"};
        ssl_verify_client on;
        location / {{
            proxy_pass {upstream};
            proxy_set_header X-Client-Subject $ssl_client_s_dn;
        }}
    }}
}}
"""
    )
    return subprocess.Popen(
        [NGINX or "nginx", "-c", str(config), "-p", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _nginx_listening(process: subprocess.Popen[bytes], port: int, tmp_path: Path) -> bool:
    """True once nginx listens on `port`; False when it exited (the port was taken).
    nginx writes its pid file only after it has bound every listening socket."""
    pid_file = tmp_path / "nginx.pid"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with contextlib.suppress(OSError, ValueError):
            if int(pid_file.read_text()) == process.pid:
                return True
        time.sleep(0.1)
    _stop(process)
    raise AssertionError(f"nginx did not listen on {port} within 30 s:\n{_log(tmp_path)}")


def _log(tmp_path: Path) -> str:
    path = tmp_path / "error.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)


def test_the_worker_presents_the_endpoints_certificate_and_nginx_refuses_one_without(
    alice, homing, authority, nginx_mtls
):
    base, ca_file, receiver = nginx_mtls
    with_certificate = endpoint_via_api(
        alice, f"{base}/hook", tls_client_certificate=authority.client_pem("alice-shop")
    )
    assert with_certificate["tls_client_certificate_info"]["subject"] == "CN=alice-shop"
    without = endpoint_via_api(alice, f"{base}/hook")
    homing("worker", SSL_CERT_FILE=str(ca_file))  # trusts nginx by the test's CA
    event = event_via_api(alice)

    [request] = receiver.wait_for(1)
    assert request.headers["webhook-id"] == event["id"]
    assert request.headers["x-client-subject"] == "CN=alice-shop"
    by_endpoint = {d["endpoint_id"]: d["id"] for d in event["deliveries"]}
    path = f"/api/v1/deliveries/{by_endpoint[without['id']]}"

    def answered() -> list[dict]:
        # An attempt that got no answer (a timeout on a loaded machine) proves nothing
        # either way; every answer must be nginx's refusal.
        attempts = alice.client.get(path).json()["attempts"]
        return [attempt for attempt in attempts if attempt["status_code"] is not None]

    wait_until(answered)
    for attempt in answered():
        # nginx completes the handshake and answers "No required SSL certificate was sent".
        assert attempt["status_code"] == 400, attempt
        assert b"No required SSL certificate" in attempt["response_body"].encode()
    ok = f"/api/v1/deliveries/{by_endpoint[with_certificate['id']]}"
    wait_until(lambda: alice.client.get(ok).json()["status"] == "succeeded")
    assert len(receiver.requests) == 1
