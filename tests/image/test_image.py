"""The container image, built and run: web, worker and scheduler containers from one image
against the PostgreSQL and Redis that tests/harness.py started (host networking), as an
operator runs them (`make test-image`; docs/deploy.md "Container image").
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import requests
import yaml
from homing_receiver import Webhook

from tests.image.podman import Podman, say
from tests.processes import ROOT, wait_until
from tests.receivers import Answer, Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

IMAGE = "localhost/homing:test"
# The image on the Debian base this test builds (Debian's python3 on bookworm); the slim
# Python base is about as large (docs/deploy.md "Container image").
MAX_IMAGE_BYTES = 250 * 1000 * 1000
# Another Redis database than the suite's (tests/conftest.py flushes that one per test).
REDIS_DB = 7
SLOW_SECONDS = 4.0
STOP_GRACE_SECONDS = 40


@dataclass
class Homing:
    podman: Podman
    base: str
    web: str
    worker: str
    scheduler: str
    url: str

    def api_key(self, name: str) -> str:
        made = self.podman("exec", self.web, "python", "manage.py", "create_tenant", name)
        return made.stdout.strip().splitlines()[-1]

    def api(self, name: str) -> requests.Session:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.api_key(name)}"
        return session


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Iterator[str]:
    """A database of its own on the harness's server, which the image's migrate fills."""
    server = os.environ["DATABASE_URL"]
    name = f"homing_image_{secrets.token_hex(4)}"
    with psycopg.connect(with_database(server, "postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield with_database(server, name)
    finally:
        with psycopg.connect(with_database(server, "postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def homing(tmp_path_factory, database) -> Iterator[Homing]:
    podman = Podman(tmp_path_factory.mktemp("podman"))
    try:
        base = podman.base_image()
        seconds = podman.build(IMAGE, base)
        say(f"{IMAGE} built in {seconds:.0f} s, {podman.size_bytes(IMAGE) / 1e6:.0f} MB")
        port = free_port()
        redis_url = re.sub(r"/\d*$", f"/{REDIS_DB}", os.environ["REDIS_URL"])
        env = {
            "DATABASE_URL": database,
            "REDIS_URL": redis_url,
            "SECRET_KEY": "image-test-" + secrets.token_hex(24),
            "ALLOWED_HOSTS": "localhost,127.0.0.1",
            "PORT": str(port),
            # The test's receivers listen on the host's loopback.
            "HOMING_ALLOW_PRIVATE_NETWORKS": "true",
        }
        migrated = podman.run(IMAGE, env, "python", "manage.py", "migrate", "--noinput")
        assert "Applying webhooks" in migrated.stdout, migrated.stdout[-2000:]
        web = podman.start("web", IMAGE, env)  # the image's default command
        worker = podman.start("worker", IMAGE, env, "worker")
        scheduler = podman.start("scheduler", IMAGE, env, "scheduler")
        homing = Homing(podman, base, web, worker, scheduler, f"http://127.0.0.1:{port}")
        wait_until(lambda: healthz(homing.url) == 200, timeout=90, interval=0.5,
                   message=f"/healthz did not answer 200:\n{logs(podman, web)}")  # fmt: skip
        yield homing
    finally:
        podman.remove_ours()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthz(url: str) -> int | None:
    try:
        return requests.get(f"{url}/healthz", timeout=5).status_code
    except requests.RequestException:
        return None


def logs(podman: Podman, container: str) -> str:
    result = podman("logs", "--tail", "40", container, check=False)
    return result.stdout + result.stderr


def test_web_answers_healthz_and_serves_the_collected_static_files(homing):
    answer = requests.get(f"{homing.url}/healthz", timeout=10)
    assert answer.status_code == 200
    assert answer.json() == {"database": "ok", "broker": "ok"}
    # The image's HEALTHCHECK, run as the engine runs it.
    assert homing.podman("healthcheck", "run", homing.web, check=False).returncode == 0
    css = requests.get(f"{homing.url}/static/admin/css/base.css", timeout=10)
    assert css.status_code == 200 and b"body" in css.content


def test_an_event_is_delivered_signed_to_a_receiver_on_the_host(homing):
    receiver = Receiver().start()
    try:
        api = homing.api("Image Test")  # create_tenant through `podman exec`
        made = api.post(f"{homing.url}/api/v1/endpoints", json={"url": receiver.url}, timeout=10)
        assert made.status_code == 201, made.text
        sent = api.post(
            f"{homing.url}/api/v1/events",
            json={"type": "order.paid", "data": {"amount": 150}},
            timeout=10,
        )
        assert sent.status_code == 202, sent.text

        (request,) = receiver.wait_for(1, timeout=60)
        event = Webhook(made.json()["secret"]).verify(request.body, request.headers)
        assert request.headers["webhook-id"] == sent.json()["id"]
        assert event["data"] == {"amount": 150}
    finally:
        receiver.stop()


def test_the_processes_run_as_a_user_other_than_root(homing):
    # (Before the test that stops the worker.)
    for container in (homing.web, homing.worker, homing.scheduler):
        users = homing.podman("top", container, "user").stdout.split()[1:]
        assert users and "root" not in users, (container, users)
    assert homing.podman("exec", homing.web, "id", "-u").stdout.strip() == "10001"


def test_stopping_the_worker_records_the_attempt_under_way(homing):
    receiver = Receiver(lambda request, n: Answer(delay=SLOW_SECONDS)).start()
    try:
        api = homing.api("Image Stop Test")
        made = api.post(f"{homing.url}/api/v1/endpoints", json={"url": receiver.url}, timeout=10)
        assert made.status_code == 201, made.text
        sent = api.post(f"{homing.url}/api/v1/events", json={"type": "a.b", "data": {}}, timeout=10)
        assert sent.status_code == 202, sent.text
        receiver.wait_for(1, timeout=60)  # the attempt is under way: the receiver is slow

        stopped = time.monotonic()
        homing.podman("stop", "--time", str(STOP_GRACE_SECONDS), homing.worker, timeout=90)
        say(f"the worker stopped in {time.monotonic() - stopped:.1f} s")

        # Recorded before the worker exited: no lease left for the scheduler to call lost.
        listed = api.get(
            f"{homing.url}/api/v1/deliveries", params={"event": sent.json()["id"]}, timeout=10
        )
        (delivery,) = listed.json()["results"]
        detail = api.get(f"{homing.url}/api/v1/deliveries/{delivery['id']}", timeout=10).json()
        assert detail["status"] == "succeeded", detail
        assert [(a["status_code"], a["error"]) for a in detail["attempts"]] == [(200, None)]
        # It stopped on its own, not killed when the grace ran out.
        state = homing.podman("inspect", "--format", "{{.State.ExitCode}}", homing.worker)
        assert state.stdout.strip() == "0", logs(homing.podman, homing.worker)
        assert len(receiver.requests) == 1
    finally:
        receiver.stop()


def test_the_image_holds_the_app_and_nothing_of_development(homing):
    listed = homing.podman(
        "run", "--rm", "--entrypoint", "find", IMAGE, "/app", "/opt/homing", "-not", "-path",
        "/opt/homing/venv/lib/*",
    )  # fmt: skip
    paths = set(listed.stdout.split())
    assert {"/app/manage.py", "/app/Procfile", "/app/staticfiles/admin"} <= paths
    development = [
        path
        for path in paths
        if re.search(r"/(\.venv|\.git|tests|bench|receiver|client|\.env|staticfiles/.*\.py)$", path)
        or re.search(r"/(test_[^/]*|conftest)\.py$", path)
        or path.startswith("/app/var/")  # no embedded database or generated key
    ]
    assert development == []
    size = homing.podman.size_bytes(IMAGE)
    assert size <= MAX_IMAGE_BYTES, f"the image is {size / 1e6:.0f} MB"


# What every Homing service of compose.yaml must set (CONTRACT section 1): production
# needs a database, a broker and a key, and the answer's host must be allowed.
REQUIRED_VARIABLES = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS"}
HOMING_SERVICES = {"migrate", "web", "worker", "scheduler"}


def documented_variables() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))


def test_the_compose_file_runs_every_process_with_the_variables_the_contract_names():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) >= HOMING_SERVICES | {"postgres", "redis"}
    known = documented_variables()
    for name in HOMING_SERVICES:
        service = services[name]
        environment = service.get("environment") or {}
        assert isinstance(environment, dict), f"{name}: environment as a mapping"
        assert set(environment) >= REQUIRED_VARIABLES, (name, sorted(environment))
        assert set(environment) <= known, f"{name}: unknown {set(environment) - known}"
        assert "build" in service or service.get("image"), name
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for name in ("worker", "scheduler"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
    for name in ("postgres", "redis"):
        assert services["migrate"]["depends_on"][name]["condition"] == "service_healthy"
        assert "healthcheck" in services[name], name
    assert services["worker"]["stop_grace_period"]
    ports = [str(port) for port in services["web"]["ports"]]
    assert any(port.startswith("8000:") or ":8000:" in port for port in ports), ports
