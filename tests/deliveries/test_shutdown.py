"""The worker's warm shutdown, which Celery runs inside its SIGTERM handler."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from deliveries import tasks


class ReenteredDispatcher:
    """Stops the way a real one does (under a non-reentrant lock, as Event.set), and
    receives the second SIGTERM in the middle of it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1
        assert self.lock.acquire(timeout=2), "deadlock: the lock the first call holds"
        try:
            if self.stops == 1:
                tasks.finish_attempts_under_way()  # the second signal lands here
        finally:
            self.lock.release()


def test_a_second_sigterm_during_the_shutdown_handler_does_not_deadlock(monkeypatch):
    dispatcher = ReenteredDispatcher()

    def cached_dispatcher() -> ReenteredDispatcher:
        return dispatcher

    cached_dispatcher.cache_info = lambda: SimpleNamespace(currsize=1)  # type: ignore[attr-defined]
    monkeypatch.setattr(tasks, "dispatcher", cached_dispatcher)
    monkeypatch.setattr(tasks, "_shutdown_started", False, raising=False)

    tasks.finish_attempts_under_way()

    assert dispatcher.stops == 1
