"""The recorder tells the watchdog when a batch started, so a batch that never ends (a
database call that hangs) is noticed; between batches it may wait as long as it likes."""

from __future__ import annotations

import threading
import time

from deliveries.worker import recorder as recorder_module
from deliveries.worker.recorder import Recorder
from tests.processes import wait_until


def test_the_heartbeat_is_busy_while_a_batch_is_written_and_idle_after(monkeypatch) -> None:
    writing, release = threading.Event(), threading.Event()

    def slow_record(*, outcomes):
        writing.set()
        release.wait(5)
        return [None] * len(outcomes)

    monkeypatch.setattr(recorder_module, "attempts_record", slow_record)
    recorder = Recorder(on_deactivate=lambda endpoint_id, reason: None)
    recorder.start()
    try:
        assert recorder.heartbeat.since is None  # waiting for work is not being stuck
        done = threading.Event()
        # A stand-in: the slow attempts_record above never reads it.
        recorder.submit(object(), lambda recorded: done.set())  # type: ignore[arg-type]  # not an Attempted
        assert writing.wait(30)  # returns as soon as the batch starts
        assert recorder.heartbeat.since is not None
        assert recorder.heartbeat.since <= time.monotonic()
        release.set()
        assert done.wait(30)
        # Idle again once the batch is over (polled: the thread may still be finishing).
        wait_until(lambda: recorder.heartbeat.since is None, timeout=30)
    finally:
        release.set()
        recorder.stop()
    assert recorder.thread is not None and not recorder.thread.is_alive()
