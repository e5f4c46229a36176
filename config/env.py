"""Reading Homing's environment variables (django-environ), refusing bad values by name.

A setting that does not parse stops the process at start-up with the variable's name,
rather than failing later in a worker with a message nobody connects to it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

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


def choice(name: str, default: str, *, choices: tuple[str, ...]) -> str:
    value = env.str(name, default=default).strip().lower()
    if value not in choices:
        raise environ.ImproperlyConfigured(f"{name}: {value!r} is not one of {', '.join(choices)}")
    return value


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


def proxy_url(name: str) -> str:
    """An `http://[user:password@]host:port` URL, or "" when the variable is unset."""
    raw = env.str(name, default="").strip()
    if not raw:
        return ""
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise environ.ImproperlyConfigured(f"{name}: {exc}") from None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise environ.ImproperlyConfigured(f"{name}: must look like http://[user:pass@]host:port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise environ.ImproperlyConfigured(f"{name}: host and port only, no path")
    return raw


def embedded_secret_key(var_dir: Path) -> str:
    """The embedded set-up's SECRET_KEY: made once per checkout, kept in var/ beside the
    SQLite file whose endpoint secrets it encrypts (removing var/ removes both).

    Random rather than a fixed development value: a key printed in the source would let
    anyone forge sessions or decrypt the endpoint secrets of a forgotten dev instance.
    Every process reads the same file; the first to start writes it, atomically.
    """
    path = var_dir / "secret_key"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        draft = var_dir / f"secret_key.{os.getpid()}.tmp"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(50))
        try:
            os.link(draft, path)  # fails if another process wrote it first: theirs wins
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    key = path.read_text().strip()
    if not key:
        raise environ.ImproperlyConfigured(f"{path} is empty: delete it or set SECRET_KEY")
    return key
