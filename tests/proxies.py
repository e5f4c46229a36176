"""A real egress proxy for tests: Debian's tinyproxy, on a free port, with a deny rule.

It connects out from its own loopback address (127.0.0.3), so a receiver tells a
request that came through it from a direct one by the peer address. tinyproxy answers a
denied CONNECT `403 Filtered` and one whose target it cannot reach `500 Unable to
connect`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

TINYPROXY = shutil.which("tinyproxy", path="/usr/bin:/usr/sbin")
PROXY_PEER = "127.0.0.3"  # the address tinyproxy connects out from


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TinyProxy:
    def __init__(self, folder: Path, *, deny_hosts: tuple[str, ...] = ()) -> None:
        self.folder = folder
        self.port = _free_port()
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o777)  # tinyproxy drops to nobody when started as root
        rules = folder / "filter"
        rules.write_text("".join(f"^{host.replace('.', '[.]')}$\n" for host in deny_hosts))
        self.config = folder / "tinyproxy.conf"
        lines = [
            f"Port {self.port}",
            "Listen 127.0.0.1",
            f"Bind {PROXY_PEER}",
            "Timeout 30",
            "MaxClients 200",
            "Allow 127.0.0.1",
            f'Filter "{rules}"',
            "FilterURLs Off",
            "FilterExtended On",
            "LogLevel Info",
        ]
        if os.geteuid() == 0:
            lines += ["User nobody", "Group nogroup"]
        self.config.write_text("\n".join(lines) + "\n")
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TinyProxy:
        assert TINYPROXY, "tinyproxy is not installed (apt-get install tinyproxy)"
        self._log = open(self.folder / "tinyproxy.log", "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            [TINYPROXY, "-d", "-c", str(self.config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"tinyproxy did not listen: {self.log()}")

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            self.popen.wait(timeout=10)
        self._log.close()

    def log(self) -> str:
        return (self.folder / "tinyproxy.log").read_text(errors="replace")
