"""`pip install ./client` gives a working, dependency-free package in a fresh venv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # builds a venv with pip

CLIENT_DIR = Path(__file__).resolve().parents[2] / "client"

# Runs inside the fresh venv: the plain client must work with the standard library
# alone, and importing homing_client.django must not drag in django (or celery).
SMOKE = textwrap.dedent(
    """
    import importlib.resources, sys
    import homing_client, homing_client.django
    from homing_client import Client, HomingError, HomingUnavailable

    client = Client("http://127.0.0.1:9", "key", retry_for=0)
    try:
        client.publish("order.created", {"n": 1})
    except HomingUnavailable as error:
        assert error.status is None
    assert not {"django", "celery"} & set(sys.modules), sorted(sys.modules)
    files = importlib.resources.files
    assert files("homing_client").joinpath("py.typed").is_file()
    assert files("homing_client.django.migrations").joinpath("0001_initial.py").is_file()
    assert files("homing_client.django.management.commands").joinpath(
        "homing_relay.py"
    ).is_file()
    assert "/venv/" in homing_client.__file__, homing_client.__file__
    from importlib.metadata import files as dist_files, metadata
    assert metadata("homing-client")["License-Expression"] == "MIT"
    licence = [f for f in dist_files("homing-client") if f.name == "LICENSE"]
    assert licence and "MIT License" in licence[0].read_text(), dist_files("homing-client")
    print("ok")
    """
)


@pytest.mark.slow
def test_pip_install_gives_a_dependency_free_package(tmp_path: Path) -> None:
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    source = tmp_path / "client"
    shutil.copytree(
        CLIENT_DIR,
        source,
        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"),
    )
    # The suite's own PYTHONPATH would let the venv see the checkout and our packages.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONNOUSERSITE": "1"}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"

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
    assert installed == ["homing-client"], freeze.stdout

    # Run from tmp_path so the checkout's sources cannot shadow the installed copy.
    smoke = subprocess.run(
        [str(python), "-c", SMOKE], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert smoke.stdout.strip() == "ok", smoke.stderr
