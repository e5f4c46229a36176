"""The watchdog: a worker process that cannot work exits (DESIGN.md, decision 17).

A worker whose claim loop died claims nothing; one whose event loop is stuck sends
nothing; one whose recorder died records nothing, and its attempts' leases expire and
they are sent again. Each of them stays up holding leases and the cluster's in-flight
places, looking alive to Celery. So a thread of its own checks, every CHECK_SECONDS, that
every thread the worker started is alive, that none has been busy with one piece of work
for longer than its patience, and that the event loop answers a ping; if not, it logs
CRITICAL and ends the process at once with EXIT_CODE. `run_worker` (or any process
manager) starts a new one; the scheduler sweeps the old one's expired leases.

Why a thread of its own, rather than the claim loop or Celery's heartbeat: the claim
loop is one of the threads that can die or hang (on a database call), and cannot report
its own death; Celery's heartbeats belong to its event machinery (we run without gossip
and mingle) and do not know our threads. The watchdog only reads a few attributes and
posts a callback, so nothing it does can block.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

logger = logging.getLogger(__name__)

EXIT_CODE = 70  # EX_SOFTWARE: the process could not go on working
CHECK_SECONDS = 1.0
# The event loop runs every callback within milliseconds unless something blocks it.
LOOP_PATIENCE_SECONDS = 10.0
# One claim, one batch recorded, one round of releases takes milliseconds; a database or
# Redis pause that lasts this long is better served by a fresh process.
WORK_PATIENCE_SECONDS = 60.0


class Heartbeat:
    """When a watched thread began the piece of work it is doing (None between two)."""

    def __init__(self) -> None:
        self.since: float | None = None

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        self.since = time.monotonic()
        try:
            yield
        finally:
            self.since = None


@dataclass(frozen=True)
class Watched:
    """A thread the worker started: `thread` returns it (None: never started or lost);
    with a heartbeat, one piece of its work may last `patience` seconds at most."""

    name: str
    thread: Callable[[], threading.Thread | None]
    heartbeat: Heartbeat | None = None
    patience: float = WORK_PATIENCE_SECONDS


class Supervisor:
    def __init__(
        self,
        *,
        watched: list[Watched],
        ping_loop: Callable[[Callable[[], None]], object],
        loop_patience: float = LOOP_PATIENCE_SECONDS,
        check_every: float = CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        exit_process: Callable[[int], None] = os._exit,
    ) -> None:
        """`ping_loop(callback)` asks the event loop to call `callback` (thread-safe)."""
        self._watched = watched
        self._ping_loop = ping_loop
        self._loop_patience = loop_patience
        self._check_every = check_every
        self._clock = clock
        self._exit_process = exit_process
        self._ping_sent_at: float | None = None  # None: the last ping was answered
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="homing-watchdog", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop watching (first thing on a shutdown: threads stopping are no fault)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def check(self) -> str | None:
        """Why the process cannot work, or None while it can."""
        now = self._clock()
        for watched in self._watched:
            thread = watched.thread()
            if thread is None or not thread.is_alive():
                return f"the {watched.name} thread died"
            since = watched.heartbeat.since if watched.heartbeat else None
            if since is not None and now - since > watched.patience:
                return f"the {watched.name} thread has been stuck for {now - since:.0f} s"
        if self._ping_sent_at is not None:
            if now - self._ping_sent_at > self._loop_patience:
                waited = now - self._ping_sent_at
                return f"the event loop has not answered for {waited:.0f} s"
            return None
        self._ping_sent_at = now
        try:
            self._ping_loop(self._answered)
        except RuntimeError:  # asyncio: the loop is closed
            return "the event loop is closed"
        return None

    def _answered(self) -> None:
        self._ping_sent_at = None

    def _run(self) -> None:
        while not self._stopping.wait(self._check_every):
            try:
                reason = self.check()
            except Exception as exc:  # a watchdog that cannot watch is no watchdog
                reason = f"the watchdog's check failed: {exc!r}"
            if reason and not self._stopping.is_set():
                self._exit(reason)
                return

    def _exit(self, reason: str) -> None:
        logger.critical(
            "the worker process exits (code %d): %s; the deliveries it holds come back when "
            "their leases expire",
            EXIT_CODE,
            reason,
        )
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        self._exit_process(EXIT_CODE)
