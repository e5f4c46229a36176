"""The first five minutes as a newcomer lives them: a fresh clone, `make run`, then every
command it prints and the README's curl flow, each typed into a new terminal that has no
DEBUG, SECRET_KEY or DATABASE_URL set."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from homing_receiver import Webhook

from tests.processes import ROOT, wait_until
from tests.receivers import Receiver

pytestmark = pytest.mark.e2e

PRINTED_COMMAND = re.compile(r"(\.venv/bin/python manage\.py [^\n]*?)\s*$", re.MULTILINE)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fresh_clone(target: Path) -> None:
    """`git clone` of this checkout, with its uncommitted edits laid over (the code under
    test), sharing this checkout's virtualenv so that `make run` installs nothing."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True)
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in files:
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    (target / ".venv").symlink_to(sys.prefix)  # the virtualenv running these tests


def new_terminal(home: Path) -> dict[str, str]:
    """What a new login shell has: no virtualenv, no Homing or Django variable."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}


def readme_api_flow(readme: str) -> str:
    """The README's curl example, from `KEY=` up to (not including) the batch example."""
    start = readme.index("KEY=hom_")
    return readme[start : readme.index("# Many events", start)]


def json_objects(text: str) -> list[dict]:
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) != -1:
        value, at = decoder.raw_decode(text, at)
        found.append(value)
    return found


def test_every_printed_command_then_the_readme_flow_work_in_a_new_terminal(tmp_path):
    checkout, home = tmp_path / "homing", tmp_path / "home"
    home.mkdir()
    fresh_clone(checkout)
    port = free_port()
    terminal = new_terminal(home)
    run_log = tmp_path / "run.log"
    with open(run_log, "wb") as log:
        run = subprocess.Popen(
            ["make", "run", f"PORT={port}"],
            cwd=checkout,
            env=terminal,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    receiver = Receiver().start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: up(base), timeout=90, message=f"web did not come up: {tail(run_log)}")
        printed = PRINTED_COMMAND.findall(run_log.read_text())
        assert {c.split()[2] for c in printed} == {"createsuperuser", "create_tenant"}, printed
        assert f"{base}/" in run_log.read_text()

        outputs = {}
        for command in printed:
            env = dict(terminal)
            if "createsuperuser" in command:
                # Its prompts need a terminal: the same command answered from variables.
                command += " --no-input"
                env.update(
                    DJANGO_SUPERUSER_USERNAME="ada",
                    DJANGO_SUPERUSER_PASSWORD="correct horse battery",
                    DJANGO_SUPERUSER_EMAIL="ada@example.com",
                )
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=checkout,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            outputs[command.split()[2]] = done.stdout
        key = outputs["create_tenant"].strip().splitlines()[-1]
        assert key.startswith("hom_")

        # The staff login works in the console the processes of `make run` serve.
        console = requests.Session()
        console.get(f"{base}/login/", timeout=10)
        signed_in = console.post(
            f"{base}/login/",
            data={
                "username": "ada",
                "password": "correct horse battery",
                "csrfmiddlewaretoken": console.cookies["csrftoken"],
            },
            timeout=10,
        )
        assert signed_in.status_code == 200 and signed_in.url == f"{base}/"

        # The README's curl flow, as printed, with the key and a local receiver.
        flow = readme_api_flow((checkout / "README.md").read_text())
        flow = re.sub(r"^KEY=hom_\S*", f"KEY={key}", flow, flags=re.MULTILINE)
        flow = flow.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        flow = flow.replace("https://example.com/webhooks", receiver.url)
        curl = subprocess.run(
            ["bash", "-e", "-c", flow],
            cwd=checkout,
            env=terminal,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert curl.returncode == 0, curl.stderr
        endpoint, event = json_objects(curl.stdout)
        assert endpoint["url"] == receiver.url, curl.stdout
        assert event["type"] == "order.paid", curl.stdout

        [webhook] = receiver.wait_for(1, timeout=30)
        verified = Webhook(endpoint["secret"]).verify(webhook.body, webhook.headers)
        assert verified["data"] == {"order": 1234, "amount": 4200}
        assert webhook.headers["webhook-id"] == event["id"]
        assert webhook.headers["x-token"] == "abc"
        # The generated key lives with the database, out of git's sight.
        assert (checkout / "var" / "secret_key").stat().st_mode & 0o077 == 0
        ignored = subprocess.run(
            ["git", "status", "--porcelain", "--ignored=no"],
            cwd=checkout,
            capture_output=True,
            text=True,
        )
        assert "var/" not in ignored.stdout
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in that terminal sends
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)  # nothing may outlive the test
        # Nor what the process manager started in sessions of its own (a scheduler and
        # a gunicorn were once found running long after): whatever runs in the checkout.
        for pid in processes_in(checkout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        receiver.stop()


def processes_in(directory: Path) -> list[int]:
    """Processes whose working directory is `directory` or under it (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone, or not ours to read
            continue
        if cwd == directory or directory in cwd.parents:
            found.append(int(entry.name))
    return found


def up(base: str) -> bool:
    try:
        return requests.get(f"{base}/healthz", timeout=5).status_code == 200
    except requests.RequestException:
        time.sleep(0.2)
        return False


def tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.exists() else ""
