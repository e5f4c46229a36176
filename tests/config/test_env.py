from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # each test starts a Python process with its own settings

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
        ("HOMING_RETENTION", "99999999999999999999d"),
        ("HOMING_MAX_ENDPOINTS_PER_TENANT", "0"),
        ("CSRF_TRUSTED_ORIGINS", "https://ok.example.com,homing.example.com"),
        # Copied into a CSP header: a `;` would add directives of the attacker's choosing.
        ("HOMING_PORTAL_FRAME_ANCESTORS", "https://app.example.com; script-src *"),
        ("HOMING_PORTAL_FRAME_ANCESTORS", "app.example.com"),
    ],
)
def test_a_bad_setting_refuses_start_up_naming_the_variable(name, value):
    started = start_django(**{name: value})
    assert started.returncode != 0
    assert name in started.stderr


def test_good_settings_start():
    started = start_django(HOMING_RETRY_SCHEDULE="1s,2m", HOMING_ENCRYPTION_KEY="a,b")
    assert started.returncode == 0, started.stderr


def settings_of(env: dict[str, str], *names: str) -> subprocess.CompletedProcess[str]:
    """Start Django with exactly `env` (no inherited DEBUG/SECRET_KEY) and print settings."""
    code = "import django; django.setup(); from django.conf import settings; " + "; ".join(
        f"print(repr(settings.{name}))" for name in names
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("debug", [None, "true", "false"])
def test_a_production_database_without_secret_key_refuses_start_up(debug):
    env = {"DATABASE_URL": os.environ["DATABASE_URL"]}
    if debug is not None:
        env["DEBUG"] = debug
    started = settings_of(env, "SECRET_KEY")
    assert started.returncode != 0
    assert "SECRET_KEY must be set" in started.stderr


def test_a_production_database_defaults_to_debug_off():
    env = {"DATABASE_URL": os.environ["DATABASE_URL"], "SECRET_KEY": "k" * 50}
    started = settings_of(env, "DEBUG", "HOMING_ALLOW_PRIVATE_NETWORKS")
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["False", "False"]


def test_csrf_trusted_origins_come_from_the_environment():
    env = {
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "SECRET_KEY": "k" * 50,
        "CSRF_TRUSTED_ORIGINS": "https://homing.example.com,https://ops.example.com:8443",
    }
    started = settings_of(env, "CSRF_TRUSTED_ORIGINS")
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == repr(
        ["https://homing.example.com", "https://ops.example.com:8443"]
    )


def test_portal_frame_ancestors_come_from_the_environment():
    env = {
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "SECRET_KEY": "k" * 50,
        "HOMING_PORTAL_FRAME_ANCESTORS": "https://app.example.com,http://localhost:3000",
    }
    started = settings_of(env, "HOMING_PORTAL_FRAME_ANCESTORS")
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == repr(["https://app.example.com", "http://localhost:3000"])
