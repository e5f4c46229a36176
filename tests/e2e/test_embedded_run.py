"""`make run` with nothing but Python: SQLite, the file broker, web + worker + scheduler."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.processes import ROOT, wait_until
from tests.receivers import Receiver

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def copy_checkout(target: Path) -> None:
    """A clean copy of the source, so the run's var/ folder does not touch this checkout."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)


def embedded_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS", "HOMING_"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def healthy(base: str) -> bool:
    try:
        return requests.get(f"{base}/healthz", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def test_make_run_embedded_delivers_an_event(tmp_path):
    checkout = tmp_path / "homing"
    copy_checkout(checkout)
    port, env = free_port(), embedded_env()
    log = open(tmp_path / "run.log", "wb")  # noqa: SIM115
    run = subprocess.Popen(
        [sys.executable, "-m", "config.run", "--port", str(port)],
        cwd=checkout,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    receiver = Receiver().start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: healthy(base), timeout=60, message="web did not come up")
        created = subprocess.run(
            [sys.executable, "manage.py", "create_tenant", "Demo"],
            cwd=checkout,
            env={**env, "DEBUG": "true"},
            capture_output=True,
            text=True,
            check=True,
        )
        key = created.stdout.strip().splitlines()[-1]
        auth = {"Authorization": f"Bearer {key}"}
        endpoint = requests.post(
            f"{base}/api/v1/endpoints", json={"url": receiver.url}, headers=auth, timeout=5
        )
        assert endpoint.status_code == 201, endpoint.text
        event = requests.post(
            f"{base}/api/v1/events",
            json={"type": "demo.ok", "data": {"n": 1}},
            headers=auth,
            timeout=5,
        )
        assert event.status_code == 202

        [request] = receiver.wait_for(1, timeout=30)
        assert request.headers["webhook-id"] == event.json()["id"]
        assert (checkout / "var" / "homing.sqlite3").exists()
        output = (tmp_path / "run.log").read_text()
        assert f"http://127.0.0.1:{port}/" in output and "create_tenant" in output
    finally:
        os.kill(run.pid, signal.SIGINT)  # what Ctrl-C sends
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.wait(timeout=30)
        leftovers = subprocess.run(
            ["pgrep", "-s", str(run.pid)], capture_output=True, text=True
        ).stdout.split()
        if leftovers:
            os.killpg(run.pid, signal.SIGKILL)  # do not leak them into the rest of the suite
        receiver.stop()
        log.close()
    assert run.returncode is not None, "make run did not stop on Ctrl-C"
    assert leftovers == [], "processes survived Ctrl-C"
