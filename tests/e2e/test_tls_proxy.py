"""The console behind nginx terminating TLS, configured as docs/deploy.md shows.

Debian's nginx runs the documented server blocks (ports and certificate paths changed)
with a self-signed certificate, in front of a real gunicorn web process. Olivia signs in
over https and replays a dead letter; her cookies are Secure and HttpOnly, answers carry
HSTS. Without HOMING_TRUST_PROXY the same sign-in is refused.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from urllib3.exceptions import InsecureRequestWarning

from tests.factories import dead_letter_via_api, endpoint_id_via_api
from tests.processes import ROOT, Process, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not shutil.which("nginx", path="/usr/sbin:/usr/bin"), reason="no nginx"),
]

NGINX = shutil.which("nginx", path="/usr/sbin:/usr/bin") or "nginx"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def documented_nginx_block() -> str:
    text = (ROOT / "docs" / "deploy.md").read_text()
    block = re.search(r"```nginx\n(.*?)```", text, re.DOTALL)
    assert block, "docs/deploy.md has no nginx block"
    return block.group(1)


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@dataclass
class Nginx:
    https_port: int
    http_port: int
    process: subprocess.Popen[bytes]
    error_log: Path

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"


def start_nginx(folder: Path, upstream_port: int) -> Nginx:
    """nginx in the foreground with its own config, pid file, logs and temp folders."""
    cert, key = self_signed_certificate(folder)
    https_port, http_port = free_port(), free_port()
    site = documented_nginx_block()
    for documented, ours in [
        ("listen 443 ssl", f"listen 127.0.0.1:{https_port} ssl"),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("/etc/letsencrypt/live/homing.example.com/fullchain.pem", str(cert)),
        ("/etc/letsencrypt/live/homing.example.com/privkey.pem", str(key)),
        ("http://127.0.0.1:8000", f"http://127.0.0.1:{upstream_port}"),
    ]:
        assert documented in site, f"docs/deploy.md's nginx block lost {documented!r}"
        site = site.replace(documented, ours)
    temp = folder / "temp"
    temp.mkdir()
    user = "user root;" if os.geteuid() == 0 else ""  # workers must reach our temp folders
    config = folder / "nginx.conf"
    config.write_text(
        f"""{user}
daemon off;
master_process on;
worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} info;
events {{ worker_connections 64; }}
http {{
    access_log {folder / "access.log"};
    client_body_temp_path {temp / "body"};
    proxy_temp_path {temp / "proxy"};
    fastcgi_temp_path {temp / "fastcgi"};
    uwsgi_temp_path {temp / "uwsgi"};
    scgi_temp_path {temp / "scgi"};
{site}
}}
"""
    )
    process = subprocess.Popen(
        [NGINX, "-c", str(config), "-p", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "stderr.log", "wb"),  # noqa: SIM115 - the child keeps it
    )
    nginx = Nginx(https_port, http_port, process, folder / "error.log")
    wait_until(
        lambda: process.poll() is not None or answers(nginx.base + "/healthz"),
        timeout=20,
        message="nginx did not start",
    )
    assert process.poll() is None, (folder / "stderr.log").read_text()
    return nginx


def answers(url: str) -> bool:
    try:
        requests.get(url, verify=False, timeout=2)
    except requests.RequestException:
        return False
    return True


@pytest.fixture
def proxied(transactional_db, tmp_path, request) -> Iterator:
    """Start gunicorn with the given HOMING_TRUST_PROXY, nginx in front of it."""
    started: list = []

    def start(trust_proxy: bool) -> Nginx:
        port = free_port()
        web = Process(
            "web",
            [
                *(sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}"),
                *("--worker-class", "config.gunicorn.BalancedThreadWorker", "--threads", "2"),
            ],
            tmp_path,
            DEBUG="false",
            ALLOWED_HOSTS="127.0.0.1,homing.example.com",
            HOMING_TRUST_PROXY="true" if trust_proxy else "false",
        )
        started.append(web)
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/healthz"), timeout=30)
        nginx_dir = tmp_path / "nginx"
        nginx_dir.mkdir()
        nginx = start_nginx(nginx_dir, port)
        started.append(nginx)
        return nginx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRequestWarning)  # our own self-signed cert
        yield start
    for thing in reversed(started):
        if isinstance(thing, Nginx):
            thing.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                thing.process.wait(timeout=10)
            if thing.process.poll() is None:
                thing.process.kill()
        else:
            thing.stop()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for thing in started:
            if not isinstance(thing, Nginx):
                print(f"----- web log -----\n{thing.log()[-5000:]}")


def make_superuser(username: str, password: str) -> None:
    # The web process runs config.settings, whose hashers do not include the tests' MD5.
    user = User.objects.create_superuser(username, f"{username}@example.com")
    user.password = PBKDF2PasswordHasher().encode(password, "salt" * 4, iterations=1000)
    user.save(update_fields=["password"])


def browser_session() -> requests.Session:
    session = requests.Session()
    session.verify = False  # the certificate is self-signed
    session.trust_env = False  # else a CA bundle named in the environment overrides that
    return session


def cookie_attributes(response: requests.Response, name: str) -> set[str]:
    """The attributes of one Set-Cookie header, lower-cased (`secure`, `httponly`, ...)."""
    for header in response.raw.headers.getlist("Set-Cookie"):
        if header.startswith(f"{name}="):
            return {part.strip().split("=")[0].lower() for part in header.split(";")[1:]}
    raise AssertionError(f"no {name} cookie set: {response.headers}")


def post_form(session: requests.Session, base: str, path: str, page: str, data: dict):
    """POST as a browser does: the CSRF token, plus Origin and Referer headers."""
    return session.post(
        base + path,
        data={"csrfmiddlewaretoken": session.cookies["csrftoken"], **data},
        headers={"Origin": base, "Referer": base + page},
        allow_redirects=False,
        timeout=10,
    )


def test_console_login_and_replay_through_nginx_over_https(proxied, alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    make_superuser("olivia", "s3cret-pass")
    nginx = proxied(trust_proxy=True)
    base = nginx.base
    olivia = browser_session()

    # http is sent to https by the documented server block.
    plain = requests.get(f"http://127.0.0.1:{nginx.http_port}/login/", allow_redirects=False)
    assert plain.status_code == 301 and plain.headers["Location"].startswith("https://")

    login_page = olivia.get(f"{base}/login/", timeout=10)
    assert login_page.status_code == 200
    assert login_page.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert {"secure", "httponly"} <= cookie_attributes(login_page, "csrftoken")

    signed_in = post_form(
        olivia,
        base,
        "/login/",
        "/login/",
        {"username": "olivia", "password": "s3cret-pass", "next": "/dead-letters/"},
    )
    assert signed_in.status_code == 302, signed_in.text[:500]
    assert signed_in.headers["Location"] == "/dead-letters/"
    assert {"secure", "httponly"} <= cookie_attributes(signed_in, "sessionid")
    assert signed_in.headers["Strict-Transport-Security"] == "max-age=31536000"

    queue = olivia.get(f"{base}/dead-letters/", timeout=10)
    assert queue.status_code == 200 and f'action="/dead-letters/{letter.id}/replay"' in queue.text
    replayed = post_form(
        olivia,
        base,
        f"/dead-letters/{letter.id}/replay",
        "/dead-letters/",
        {"next": "/dead-letters/"},
    )
    assert replayed.status_code == 302, replayed.text[:500]
    after = olivia.get(base + replayed.headers["Location"], timeout=10)
    assert f"Replayed {letter.id}" in after.text
    letter.refresh_from_db()
    assert letter.replayed_at is not None


def test_without_trusting_the_proxy_the_login_post_is_refused(proxied, db):
    make_superuser("olivia", "s3cret-pass")
    nginx = proxied(trust_proxy=False)
    olivia = browser_session()
    login_page = olivia.get(f"{nginx.base}/login/", timeout=10)
    assert "Strict-Transport-Security" not in login_page.headers
    assert "secure" not in cookie_attributes(login_page, "csrftoken")
    refused = post_form(
        olivia,
        nginx.base,
        "/login/",
        "/login/",
        {"username": "olivia", "password": "s3cret-pass"},
    )
    assert refused.status_code == 403
    assert "sessionid" not in olivia.cookies
