"""Run the test suite against throwaway PostgreSQL and Redis servers.

    python -m tests.harness                      # the whole suite, as `make test` runs it
    python -m tests.harness [pytest arguments]   # one pytest run with these arguments

Starts both servers on free loopback ports with temporary data directories, exports
DATABASE_URL and REDIS_URL (plus HOMING_TEST_* so tests can restart them), runs pytest
and always stops the servers. Missing server binaries are installed from Debian packages
when running as root, otherwise the exact command to run is printed.

The whole suite runs in two passes. Most of its time is spent waiting (on receivers,
retry back-offs, processes starting), not computing, so the first pass runs every test
not marked `serial` in TEST_WORKERS pytest-xdist workers at once, each with its own
PostgreSQL and Redis databases (tests/parallel.py). The second runs the `serial` tests,
which stop or restart the shared servers, on their own. Then it prints the 20 slowest
tests of both passes.
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
import xml.etree.ElementTree as ET
from pathlib import Path

# xdist workers of the parallel pass: the tests mostly wait, so more workers than cores
# pay. On 2 shared cores the parallel pass took 540 s with 3 and 432 s with 4.
DEFAULT_WORKERS = 4
SLOWEST = 20
ROOT = Path(__file__).resolve().parent.parent


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
            # The egress proxy (tests/proxies.py, HOMING_EGRESS_PROXY).
            ("tinyproxy", shutil.which("tinyproxy", path="/usr/bin:/usr/sbin")),
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


def run_pytest(args: list[str], env: dict[str, str]) -> int:
    return subprocess.call([sys.executable, "-m", "pytest", *args], env=env)


# Run a second time against SQLite by `make test`.
CLAIMS_TESTS = [
    "tests/deliveries/lifecycle/test_scheduling.py",
    "tests/deliveries/worker/test_fair_claims.py",
    "tests/deliveries/lifecycle/test_leases.py",
    "tests/deliveries/worker/test_claim_sql.py",
    "tests/deliveries/worker/test_budget.py",
    # recording's and health's SQLite twins (deliveries/lifecycle/record_sql.py)
    "tests/deliveries/lifecycle/test_record_sql.py",
    # the endpoint statistics' twin (deliveries/stats_sql.py)
    "tests/deliveries/test_stats_sql.py",
]


def run_suite(env: dict[str, str], workdir: Path) -> int:
    """The whole suite: a parallel pass, then the `serial` tests alone; the slowest 20."""
    workers = int(os.environ.get("TEST_WORKERS") or DEFAULT_WORKERS)
    reports = [workdir / "parallel.xml", workdir / "serial.xml"]
    reports.append(workdir / "sqlite.xml")
    # The claims again on SQLite (the embedded set-up's twin statements, claims_sqlite.py):
    # the tests of what only PostgreSQL has skip themselves (tests/databases.py).
    on_sqlite = {**env, "DATABASE_URL": f"sqlite:///{workdir / 'claims.sqlite3'}"}
    passes = [
        ("parallel", ["-m", "not serial", "-n", str(workers), "--dist", "worksteal"], env),
        ("serial", ["-m", "serial"], env),
        ("claims on SQLite", ["-m", "not e2e", *CLAIMS_TESTS], on_sqlite),
    ]
    codes = []
    for (name, args, pass_env), report in zip(passes, reports, strict=True):
        say(f"{name} pass: pytest {' '.join(args)}")
        started = time.monotonic()
        codes.append(run_pytest([*args, f"--junitxml={report}"], pass_env))
        say(f"{name} pass: exit {codes[-1]} after {time.monotonic() - started:.0f} s")
    print_slowest(reports)
    # 5: no test selected (a run with every serial test deselected is still a pass).
    return next((code for code in codes if code not in (0, 5)), 0)


def print_slowest(reports: list[Path]) -> None:
    durations = []
    for report in reports:
        if report.exists():
            for case in ET.parse(report).iter("testcase"):
                name = node_id(case.get("classname") or "", case.get("name") or "")
                durations.append((float(case.get("time") or 0), name))
    durations.sort(reverse=True)
    say(f"the {SLOWEST} slowest tests (setup + call + teardown, seconds):")
    for seconds, name in durations[:SLOWEST]:
        print(f"{seconds:9.2f}  {name}", flush=True)


def node_id(classname: str, name: str) -> str:
    """pytest's id of a JUnit test case: tests.a.test_b + test_c -> tests/a/test_b.py::test_c."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (ROOT / path).exists():
            return "::".join([path, *parts[end:], name])
    return f"{classname}::{name}"


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
        if not pytest_args:
            return run_suite(env, workdir)
        if os.environ.get("TEST_ON_SQLITE"):
            # As the "claims on SQLite" pass: the embedded set-up's own claim statements
            # (claims_sqlite.py), its unit tests only. SQLite is a database Homing runs on,
            # never a stand-in for PostgreSQL in any other test.
            files = [arg.split("::")[0] for arg in pytest_args if arg.startswith("tests/")]
            if not files or any(f not in CLAIMS_TESTS for f in files):
                say(f"TEST_ON_SQLITE runs only these files: {', '.join(CLAIMS_TESTS)}")
                return 2
            env["DATABASE_URL"] = f"sqlite:///{workdir / 'claims.sqlite3'}"
            pytest_args = [*pytest_args, "-m", "not e2e"]
        return run_pytest(pytest_args, env)
    finally:
        say("stopping the servers")
        redis.stop()
        with contextlib.suppress(subprocess.CalledProcessError):
            postgres.pg_ctl("stop")  # a test may have stopped it already
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
