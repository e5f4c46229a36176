"""A pytest plugin: a test without the `e2e` marker may not start a process.

`make test-fast` runs `-m "not e2e"` and must stay quick, so every test that starts a
subprocess (a Celery worker, gunicorn, nginx, chromium, `manage.py`, pip) carries
`@pytest.mark.e2e`; a test that forgets it fails here instead of slowing the fast tier
down unnoticed. In-process servers (the threaded receivers in tests/receivers.py, Django's
`live_server`) are allowed: they are the network edge of in-process tests and cost
milliseconds. PostgreSQL and Redis are started by tests/harness.py before pytest runs.

The checks are installed once and consult `_running`, the test being run without the
marker (None while an e2e test or no test runs), so a nested pytest run (this guard's
own test) sets its own state and restores the outer one.
"""

from __future__ import annotations

import functools
import multiprocessing.util
import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

MARKER = "e2e"
_running: str | None = None


class ProcessStartedWithoutE2EMarker(AssertionError):
    pass


def _refuse(what: str) -> None:
    raise ProcessStartedWithoutE2EMarker(
        f"{_running} started a process ({what}) but is not marked "
        f"@pytest.mark.{MARKER}. Tests that start processes or servers belong to the e2e "
        f"tier (make test), not to make test-fast: add `pytestmark = pytest.mark.{MARKER}` "
        "to the module or the marker to the test."
    )


def _guarded(original: Callable[..., Any], describe: Callable[..., str]) -> Callable[..., Any]:
    @functools.wraps(original)
    def check_then_call(*args: Any, **kwargs: Any) -> Any:
        if _running is not None:
            _refuse(describe(*args, **kwargs))
        return original(*args, **kwargs)

    check_then_call.__process_guard__ = True  # type: ignore[attr-defined]  # a marker attribute
    return check_then_call


def _command(args: Any) -> str:
    if isinstance(args, str | bytes | os.PathLike):
        return os.fsdecode(args)
    return " ".join(os.fsdecode(arg) for arg in args)


# Every way Python starts a process: subprocess (also os.popen, asyncio and Playwright),
# fork (multiprocessing's default), posix_spawn, os.system, multiprocessing's spawn and
# forkserver start methods.
_ENTRY_POINTS: list[tuple[Any, str, Callable[..., str]]] = [
    (subprocess.Popen, "_execute_child", lambda self, args, *rest, **kw: _command(args)),
    (os, "fork", lambda: "os.fork()"),
    (os, "forkpty", lambda: "os.forkpty()"),
    (os, "posix_spawn", lambda path, *rest, **kw: _command(path)),
    (os, "posix_spawnp", lambda path, *rest, **kw: _command(path)),
    (os, "system", lambda command: _command(command)),
    (multiprocessing.util, "spawnv_passfds", lambda path, *rest: _command(path)),
]


def install() -> None:
    """Wraps each entry point once; idempotent, so nested pytest runs share the wrappers."""
    for owner, name, describe in _ENTRY_POINTS:
        original = getattr(owner, name)
        if not getattr(original, "__process_guard__", False):
            setattr(owner, name, _guarded(original, describe))


def pytest_configure(config: pytest.Config) -> None:
    if not any(line.startswith(f"{MARKER}:") for line in config.getini("markers")):
        config.addinivalue_line("markers", f"{MARKER}: starts processes or servers")
    install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # Setup included: a session fixture that starts a server for an unmarked test is caught.
    global _running
    outer = _running
    _running = None if item.get_closest_marker(MARKER) else item.nodeid
    try:
        return (yield)
    finally:
        _running = outer
