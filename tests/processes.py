"""Start Homing's real processes (web, Celery worker, scheduler) against the test database."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def process_env(**overrides: str) -> dict[str, str]:
    """The environment of a Homing process that shares this test's database and Redis."""
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "HOMING_ALLOW_PRIVATE_NETWORKS": "true",
        "HOMING_RETRY_SCHEDULE": settings.HOMING_RETRY_SCHEDULE,
        "HOMING_RETRY_JITTER": str(settings.HOMING_RETRY_JITTER),
        "HOMING_DELIVERY_TIMEOUT": str(settings.HOMING_DELIVERY_TIMEOUT),
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "WARNING",
    }
    env.update(overrides)
    return env


class Process:
    def __init__(self, name: str, args: list[str], log_dir: Path, **env: str) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            args,
            cwd=ROOT,
            env=process_env(**env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def kill_hard(self) -> None:
        """kill -9 the whole process group, as a crash would."""
        os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)
        _wait_for_group(self.popen.pid, timeout=10)

    def stop(self) -> None:
        """SIGTERM to the whole group, then SIGKILL to whatever is left after 15 s. Done
        when every process of the group is gone, not only the first: a child still
        running (a Celery worker under run_worker, a gunicorn worker) holds a database
        connection, and the test database cannot be dropped at the end of the session."""
        if _group_alive(self.popen.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=15)
            if not _wait_for_group(self.popen.pid, timeout=5):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
                _wait_for_group(self.popen.pid, timeout=10)
        self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _group_alive(group: int) -> bool:
    """Whether a process of this process group is still running (zombies do not count:
    they hold nothing)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # pid (comm) state ppid pgrp ...: comm may hold spaces, split after its ')'.
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[2]) == group and fields[0] != "Z":
                return True
    return False


def _wait_for_group(group: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _group_alive(group):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def start_worker(log_dir: Path, name: str = "worker", concurrency: int = 4, **env: str) -> Process:
    """The Procfile's worker: a Celery worker under run_worker, which restarts it."""
    return Process(
        name,
        [
            sys.executable,
            "manage.py",
            "run_worker",
            "--concurrency",
            str(concurrency),
            "--name",
            name,
            "--loglevel",
            "WARNING",
        ],
        log_dir,
        **env,
    )


def start_scheduler(log_dir: Path, name: str = "scheduler", **env: str) -> Process:
    return Process(
        name, [sys.executable, "manage.py", "run_scheduler", "--tick", "0.2"], log_dir, **env
    )


def wait_until(predicate, timeout: float = 30, interval: float = 0.1, message: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(message or f"condition not met within {timeout}s")


class Web:
    """A real gunicorn web process, as the Procfile runs it, on a free port."""

    def __init__(
        self,
        log_dir,
        name: str,
        threads: int = 2,
        workers: int = 1,
        env: dict[str, str] | None = None,
    ) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = Process(
            name,
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--worker-class",
                "config.gunicorn.BalancedThreadWorker",
                "--workers",
                str(workers),
                "--threads",
                str(threads),
            ],
            log_dir,
            **(env or {}),
        )
        wait_until(self._up, timeout=30, message=f"{name} did not start: {self.process.log()}")

    def _up(self) -> bool:
        try:
            self.call("GET", "/healthz", key="")
        except OSError:
            return False
        return True

    def call(
        self, method: str, path: str, *, key: str, body=None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            headers = {
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
                **(headers or {}),
            }
            payload = None if body is None else json.dumps(body)
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        return response.status, (json.loads(raw) if raw else None)
