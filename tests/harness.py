"""Run the test suite against throwaway PostgreSQL and Redis servers.

    python -m tests.harness [pytest arguments]

Starts both servers on free loopback ports with temporary data directories, exports
DATABASE_URL and REDIS_URL (plus HOMING_TEST_* so tests can restart them), runs pytest
and always stops the servers. Missing server binaries are installed from Debian packages
when running as root, otherwise the exact command to run is printed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def say(message: str) -> None:
    print(f"[harness] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bindir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    found = shutil.which("postgres")
    return Path(found).parent if found else None


CHROMIUM = "/usr/bin/chromium"  # the browser tests drive Debian's chromium (Playwright)
# A worker whose clock is off is tested under libfaketime (Debian's faketime).
FAKETIME_LIBRARY = "/usr/lib/*/faketime/libfaketimeMT.so.1"


def ensure_binaries() -> tuple[Path, str]:
    bindir, redis_server = postgres_bindir(), shutil.which("redis-server")
    missing = [
        package
        for package, present in [
            ("postgresql", bindir),
            ("redis-server", redis_server),
            ("chromium", os.path.exists(CHROMIUM)),
            ("faketime", glob.glob(FAKETIME_LIBRARY)),
            # The console behind a TLS-terminating proxy (tests/e2e/test_tls_proxy.py).
            ("nginx-light", shutil.which("nginx", path="/usr/sbin:/usr/bin")),
            ("openssl", shutil.which("openssl")),
        ]
        if not present
    ]
    if not missing and bindir and redis_server:  # (both present when nothing is missing)
        return bindir, redis_server
    command = f"apt-get update && apt-get install -y {' '.join(missing)}"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        if bindir and redis_server:  # only test tools are missing: their tests skip
            say(f"{', '.join(missing)} not found: their tests will be skipped ({command})")
            return bindir, redis_server
        sys.exit(
            f"[harness] PostgreSQL and Redis servers are needed. Install them with:\n"
            f"    sudo {command}"
        )
    say(f"installing what is missing: {command}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env)
    bindir, redis_server = postgres_bindir(), shutil.which("redis-server")
    if not (bindir and redis_server):
        sys.exit("[harness] the packages installed but the server binaries were not found")
    return bindir, redis_server


def server_user() -> str | None:
    """PostgreSQL refuses to run as root: use an unprivileged account then."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    sys.exit("[harness] running as root and no unprivileged user (postgres, nobody) exists")


def wait_for_port(port: int, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"[harness] {what} did not start listening on port {port}")


class Postgres:
    def __init__(self, bindir: Path, workdir: Path, user: str | None) -> None:
        self.bindir, self.user, self.port = bindir, user, free_port()
        self.datadir = workdir / "pgdata"
        self.log = workdir / "postgres.log"

    def _run(self, *args: str) -> None:
        subprocess.run(args, check=True, user=self.user, stdout=subprocess.DEVNULL)

    def start(self) -> None:
        self.datadir.mkdir()
        if self.user:
            shutil.chown(self.datadir, self.user)
            shutil.chown(self.datadir.parent, self.user)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.datadir),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        with open(self.datadir / "postgresql.conf", "a") as conf:
            # Throwaway data: durability off for speed; enough connections for workers.
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.datadir}'\nfsync = off\n"
                "synchronous_commit = off\nfull_page_writes = off\n"
                "max_connections = 300\n"
            )
        self.pg_ctl("start")

    def pg_ctl(self, action: str) -> None:
        args = [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-w", "-l", str(self.log)]
        if action == "stop":
            args += ["-m", "immediate"]
        self._run(*args, action)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/homing"


def redis_command(binary: str, port: int) -> list[str]:
    """A throwaway redis-server on loopback that persists nothing."""
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]


class Redis:
    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary, self.workdir, self.port = binary, workdir, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [*redis_command(self.binary, self.port), "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port, "redis-server")

    def stop(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait(timeout=10)
        # A test may have restarted Redis on this port: stop whichever server is there.
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", self.port), timeout=2) as conn,
        ):
            conn.sendall(b"SHUTDOWN NOSAVE\r\n")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def main(pytest_args: list[str]) -> int:
    bindir, redis_binary = ensure_binaries()
    workdir = Path(tempfile.mkdtemp(prefix="homing-test-"))
    user = server_user()
    postgres, redis = Postgres(bindir, workdir, user), Redis(redis_binary, workdir)
    try:
        say(f"starting PostgreSQL on 127.0.0.1:{postgres.port} and Redis on 127.0.0.1:{redis.port}")
        postgres.start()
        redis.start()
        env = {
            **os.environ,
            "DATABASE_URL": postgres.url,
            "REDIS_URL": redis.url,
            "SECRET_KEY": "homing-test-secret",
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "HOMING_TEST_PG_BIN": str(bindir),
            "HOMING_TEST_PGDATA": str(postgres.datadir),
            "HOMING_TEST_PG_LOG": str(postgres.log),
            "HOMING_TEST_PG_USER": user or "",
            "HOMING_TEST_REDIS_SERVER": redis_binary,
            "HOMING_TEST_WORKDIR": str(workdir),
        }
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], env=env)
    finally:
        say("stopping the servers")
        redis.stop()
        with contextlib.suppress(subprocess.CalledProcessError):
            postgres.pg_ctl("stop")  # a test may have stopped it already
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
