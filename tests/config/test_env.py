from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def start_django(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HOMING_RETRY_SCHEDULE", "1s,5x,30s"),
        ("HOMING_RETRY_SCHEDULE", ""),
        ("HOMING_SECRET_ROTATION_GRACE", "soon"),
        ("HOMING_MAX_ENDPOINTS_PER_TENANT", "0"),
    ],
)
def test_a_bad_setting_refuses_start_up_naming_the_variable(name, value):
    started = start_django(**{name: value})
    assert started.returncode != 0
    assert name in started.stderr


def test_good_settings_start():
    started = start_django(HOMING_RETRY_SCHEDULE="1s,2m", HOMING_ENCRYPTION_KEY="a,b")
    assert started.returncode == 0, started.stderr
