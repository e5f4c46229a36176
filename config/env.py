"""Reading Homing's environment variables (django-environ), refusing bad values by name.

A setting that does not parse stops the process at start-up with the variable's name,
rather than failing later in a worker with a message nobody connects to it.
"""

from __future__ import annotations

from pathlib import Path

import environ

from core.durations import parse_duration, parse_schedule

env = environ.Env()


def read_dotenv(base_dir: Path) -> None:
    environ.Env.read_env(base_dir / ".env")  # optional; real environment variables win


def duration(name: str, default: str) -> float:
    """Seconds from a duration variable (`30s`, `5m`, `2h`, `5d`; a bare number is seconds)."""
    raw = env.str(name, default=default)
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise environ.ImproperlyConfigured(f"{name}: {exc}") from None


def schedule(name: str, default: str) -> str:
    """A comma-separated list of durations, checked now; returned as written."""
    raw = env.str(name, default=default)
    try:
        parse_schedule(raw)
    except ValueError as exc:
        raise environ.ImproperlyConfigured(f"{name}: {exc}") from None
    return raw


def number(name: str, default: float, *, minimum: float, maximum: float) -> float:
    try:
        value = env.float(name, default=default)
    except ValueError:
        raise environ.ImproperlyConfigured(f"{name}: {env.str(name)!r} is not a number") from None
    if not minimum <= value <= maximum:
        raise environ.ImproperlyConfigured(
            f"{name}: {value} is not between {minimum} and {maximum}"
        )
    return value
