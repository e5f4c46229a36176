"""`pip install ./receiver` gives a working, dependency-free package in a fresh venv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # builds a venv with pip

RECEIVER_DIR = Path(__file__).resolve().parents[2] / "receiver"

# Runs inside the fresh venv: the core must work with the standard library alone
# and must not drag in django or redis, even through homing_receiver.django.
SMOKE = textwrap.dedent(
    """
    import importlib.resources, sys
    import homing_receiver, homing_receiver.django
    from homing_receiver import Deduplicator, Feed, MemoryStore, SequenceTracker, Webhook
    from homing_receiver import catch_up

    hook = Webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", now=lambda: 1614265330)
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }
    assert hook.verify(b'{"test": 2432232314}', headers) == {"test": 2432232314}
    assert Deduplicator(MemoryStore()).process("msg_1", lambda: None) is True
    tracker = SequenceTracker(MemoryStore(), "ep_1")
    tracker.see(2)
    assert tracker.gaps() == [(1, 1)]
    assert callable(catch_up) and Feed("http://homing.invalid/api/v1", "key", "ep_1")
    assert not {"django", "redis"} & set(sys.modules), sorted(sys.modules)
    assert importlib.resources.files("homing_receiver").joinpath("py.typed").is_file()
    migrations = importlib.resources.files("homing_receiver.django.migrations")
    assert migrations.joinpath("0001_initial.py").is_file()
    assert migrations.joinpath("0002_sequences.py").is_file()
    assert "/venv/" in homing_receiver.__file__, homing_receiver.__file__
    from importlib.metadata import files as dist_files, metadata
    assert metadata("homing-receiver")["License-Expression"] == "MIT"
    licence = [f for f in dist_files("homing-receiver") if f.name == "LICENSE"]
    assert licence and "MIT License" in licence[0].read_text(), dist_files("homing-receiver")
    print("ok")
    """
)


@pytest.mark.slow
def test_pip_install_gives_a_dependency_free_package(tmp_path: Path) -> None:
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    source = tmp_path / "receiver"
    shutil.copytree(
        RECEIVER_DIR,
        source,
        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"),
    )
    # The suite's own PYTHONPATH would let the venv see the checkout and our packages.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONNOUSERSITE": "1"}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"

    # Build isolation fetches setuptools from the configured index or find-links;
    # the venv's own bundled setuptools is too old to build a wheel by itself.
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    freeze = subprocess.run(
        [str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True, env=env
    )
    installed = [line.split(" ")[0].split("==")[0] for line in freeze.stdout.splitlines()]
    assert installed == ["homing-receiver"], freeze.stdout

    # Run from tmp_path so the checkout's sources cannot shadow the installed copy.
    smoke = subprocess.run(
        [str(python), "-c", SMOKE], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert smoke.stdout.strip() == "ok", smoke.stderr
