"""Podman for the image test: installed if missing, a local base image, Homing's image.

No image registry is reachable from CI, so the base image is made from Debian's mirror
(debootstrap: Debian's own python3 on bookworm, as python:3.11-slim-bookworm is Python
on bookworm) and kept in podman's store under a tag naming its recipe, so later runs
reuse it. Podman runs as root with runc, the cgroupfs manager and host networking: the
containers reach the PostgreSQL and Redis that tests/harness.py started on loopback.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.processes import ROOT

PACKAGES = {"podman": "podman", "runc": "runc", "debootstrap": "debootstrap"}
SBIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# crun refuses this kind of machine's cgroups; runc does not. No default ulimits: the
# container may not raise its nofile limit above the host's.
CONTAINERS_CONF = '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n'
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = "python3,python3-venv"
# What a slim base has no use for: package caches and lists, documentation, translations.
BASE_TRIM = ["var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"]
BASE_TRIM += ["usr/share/info", "usr/share/locale"]
# The host's certificate store, so pip in the build trusts what the host trusts (a CI
# network may inspect TLS with its own authority, as the host's pip configuration says).
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
LABEL = "homing-image-test"


def say(message: str) -> None:
    print(f"[image] {message}", flush=True)


def install_missing() -> None:
    missing = [
        package
        for command, package in PACKAGES.items()
        if not shutil.which(command, path=SBIN_PATH)
    ]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(f"install them first: sudo apt-get install {' '.join(missing)}")
    say(f"installing {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdin=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
        check=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )


class Podman:
    def __init__(self, workdir: Path) -> None:
        install_missing()
        conf = workdir / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.runc = shutil.which("runc", path=SBIN_PATH) or "runc"
        self.run_id = f"{LABEL}-{os.getpid()}"

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["podman", "--runtime", self.runc, *args],
            env=self.env,
            input=stdin.decode() if stdin is not None else None,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"podman {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result

    def image_exists(self, tag: str) -> bool:
        return self("image", "exists", tag, check=False).returncode == 0

    def base_image(self) -> str:
        recipe = f"{DEBIAN_MIRROR} bookworm minbase {BASE_PACKAGES} {BASE_TRIM}"
        if HOST_CA_BUNDLE.exists():
            recipe += hashlib.sha256(HOST_CA_BUNDLE.read_bytes()).hexdigest()
        digest = hashlib.sha256(recipe.encode()).hexdigest()[:12]
        tag = f"localhost/homing-test-base:bookworm-{digest}"
        if self.image_exists(tag):
            say(f"base image {tag} (cached)")
            return tag
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="homing-base-") as tmp:
            root = Path(tmp) / "root"
            debootstrap = ["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}"]
            subprocess.run(
                [*debootstrap, "bookworm", str(root), DEBIAN_MIRROR],
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                timeout=600,
            )
            for path in BASE_TRIM:
                shutil.rmtree(root / path, ignore_errors=True)
            changes = []
            if HOST_CA_BUNDLE.exists():
                (root / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
                shutil.copy(HOST_CA_BUNDLE, root / "etc/ssl/certs/ca-certificates.crt")
                changes = [f"ENV SSL_CERT_FILE={HOST_CA_BUNDLE}", f"ENV PIP_CERT={HOST_CA_BUNDLE}"]
            tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
            subprocess.run(
                ["podman", "import", "--quiet"]
                + [arg for change in changes for arg in ("--change", change)]
                + ["-", tag],
                stdin=tar.stdout,
                env=self.env,
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=300,
            )
            assert tar.wait() == 0
        say(f"base image {tag} made in {time.monotonic() - started:.0f} s")
        return tag

    def build(self, tag: str, base: str) -> float:
        started = time.monotonic()
        self(
            "build",
            "--format",
            "docker",  # OCI images have no HEALTHCHECK
            "--network",
            "host",
            "--build-arg",
            f"BASE_IMAGE={base}",
            "--tag",
            tag,
            str(ROOT),
            timeout=600,
        )
        return time.monotonic() - started

    def size_bytes(self, tag: str) -> int:
        return int(self("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())

    def start(self, name: str, image: str, env: dict[str, str], *command: str) -> str:
        """A detached container on the host's network; its name, for exec, stop and logs."""
        container = f"{self.run_id}-{name}"
        env_args = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
        self("run", "--detach", "--name", container, "--label", LABEL, "--network", "host",
             *env_args, image, *command)  # fmt: skip
        return container

    def run(
        self, image: str, env: dict[str, str], *command: str
    ) -> subprocess.CompletedProcess[str]:
        """A one-off container (`migrate`), removed when it ends."""
        env_args = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
        return self("run", "--rm", "--label", LABEL, "--network", "host", *env_args, image,
                    *command, timeout=300)  # fmt: skip

    def remove_ours(self) -> None:
        """Every container this run started, running or not: the test cleans up after itself."""
        names = self("ps", "--all", "--format", "{{.Names}}", check=False).stdout.split()
        ours = [name for name in names if name.startswith(f"{self.run_id}-")]
        if ours:
            self("rm", "--force", "--time", "0", *ours, check=False, timeout=120)
