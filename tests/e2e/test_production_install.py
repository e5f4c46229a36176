"""A production install as a new operator makes it: a fresh virtualenv with
`pip install -r requirements.txt` only, then every Procfile process from that
virtualenv against PostgreSQL and Redis, logging JSON (LOG_FORMAT=json)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.processes import ROOT, process_env, wait_until
from webhooks.services.tenants import tenant_create

pytestmark = pytest.mark.e2e

LOG_KEYS = {"time", "level", "logger", "message"}
# Celery's signal handlers write these with a raw os.write, outside logging altogether.
CELERY_SIGNAL_NOTICES = ("worker: Warm shutdown", "worker: Cold shutdown")


@pytest.fixture(scope="module")
def production_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("prod") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [
            venv / "bin" / "python",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(ROOT / "requirements.txt"),
        ],
        check=True,
        timeout=300,
    )
    return venv


def procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip() and not line.startswith("#"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ProcfileProcess:
    def __init__(self, name: str, command: str, venv: Path, log_dir: Path, **env: str) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        environment = process_env(
            PATH=f"{venv / 'bin'}:/usr/bin:/bin",
            VIRTUAL_ENV=str(venv),
            LOG_FORMAT="json",
            LOG_LEVEL="INFO",
            DEBUG="false",
            SECRET_KEY="production-install-test-" + "x" * 40,
            **env,
        )
        environment.pop("PYTHONPATH", None)
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=ROOT,
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, 15)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, 9)
                self.popen.wait()

    def lines(self) -> list[str]:
        text = self.log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if line.strip()]


def test_it_runs_every_procfile_process_from_requirements_alone(
    production_venv, transactional_db, receiver_factory, tmp_path
):
    assert production_venv.joinpath("bin", "gunicorn").exists()
    port = free_port()
    processes = [
        ProcfileProcess(
            name, command, production_venv, tmp_path, PORT=str(port), WORKER_CONCURRENCY="2"
        )
        for name, command in procfile().items()
    ]
    try:
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return requests.get(f"{base}/healthz", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        wait_until(healthy, timeout=60, message="/healthz did not answer 200")
        _deliver_through_the_api(base, receiver_factory)
        for process in processes:
            assert process.popen.poll() is None, f"{process.name} died:\n{process.lines()[-20:]}"
    finally:
        for process in processes:
            process.stop()
    _assert_json_logs_without_secrets(processes, SEEN_SECRETS)


SEEN_SECRETS: list[str] = []
SEEN_REQUEST_IDS: list[str] = []


def _deliver_through_the_api(base: str, receiver_factory) -> None:
    _, key = tenant_create(name="Ops Test")
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {key}"
    receiver = receiver_factory()

    made = api.post(f"{base}/api/v1/endpoints", json={"url": receiver.url}, timeout=10)
    assert made.status_code == 201, made.text
    endpoint = made.json()
    rotated = api.post(f"{base}/api/v1/endpoints/{endpoint['id']}/rotate-secret", timeout=10)
    assert rotated.status_code == 200

    sent = api.post(
        f"{base}/api/v1/events",
        json={"type": "order.paid", "data": {"n": 1}},
        headers={"X-Request-ID": "caller-trace-42"},
        timeout=10,
    )
    assert sent.status_code == 202, sent.text
    assert sent.headers["X-Request-ID"] == "caller-trace-42"
    test = api.post(f"{base}/api/v1/endpoints/{endpoint['id']}/test", timeout=10)
    assert test.status_code == 202, test.text
    missing = api.get(f"{base}/api/v1/endpoints/ep_missing", timeout=10)
    assert missing.status_code == 404
    assert missing.headers["X-Request-ID"].startswith("req_")

    received = receiver.wait_for(2, timeout=30)
    assert {r.headers["webhook-id"] for r in received} == {
        sent.json()["id"],
        test.json()["event_id"],
    }
    SEEN_SECRETS[:] = [
        key,
        endpoint["secret"],
        rotated.json()["secret"],
        *(r.headers["webhook-signature"] for r in received),
    ]
    SEEN_REQUEST_IDS[:] = ["caller-trace-42", missing.headers["X-Request-ID"]]
    time.sleep(0.5)  # let the access log of the last request be written


def _assert_json_logs_without_secrets(processes, secrets) -> None:
    access_ids = set()
    for process in processes:
        lines = process.lines()
        assert lines, f"{process.name} logged nothing"
        for line in lines:
            if line.startswith(CELERY_SIGNAL_NOTICES):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                pytest.fail(f"{process.name} logged a line that is not JSON: {line!r}")
            assert set(record) >= LOG_KEYS, f"{process.name}: {line}"
            for secret in secrets:
                for piece in secret.split(" "):
                    assert piece.split(",")[-1] not in line, f"{process.name} logged a secret"
            if record["logger"] == "gunicorn.access":
                access_ids.add(record.get("request_id"))
    assert set(SEEN_REQUEST_IDS) <= access_ids
