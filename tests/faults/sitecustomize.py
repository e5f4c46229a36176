"""Fault injection for real worker processes (tests/e2e/test_worker_supervision.py).

A test starts a worker with this directory on PYTHONPATH, so Python imports this module
at start-up in each of the worker's processes (`run_worker` and the Celery worker it
restarts). With HOMING_TEST_FAULT set, once Celery is ready and the `Worker` runs, it
waits for the file HOMING_TEST_FAULT_TRIGGER to appear, takes it (so that only one
process fires), and breaks one of the worker's threads the way a bug would: an exception
no handler catches, or a call that blocks the event loop.
"""

from __future__ import annotations

import os
import threading
import time

FAULT = os.environ.get("HOMING_TEST_FAULT")
TRIGGER = os.environ.get("HOMING_TEST_FAULT_TRIGGER", "")


class InjectedFault(SystemExit):
    """Passes every `except Exception` (and asyncio's callback guard), as a bug's
    BaseException would: the thread it is raised in ends."""


def _raise(*args, **kwargs):
    raise InjectedFault(f"injected fault: {FAULT}")


def _break(worker) -> None:
    from core import counters
    from deliveries import wakeups as queue

    loop = worker.sender.loop
    if FAULT == "claims":
        worker.claims.claim_once = _raise
        worker.claims.housekeeping = _raise  # called on every turn, idle or not
    elif FAULT == "event loop":
        loop.call_soon_threadsafe(_raise)
    elif FAULT == "event loop stuck":
        loop.call_soon_threadsafe(time.sleep, 3600)
    elif FAULT == "recorder":
        from deliveries.worker import recorder

        recorder.attempts_record = _raise
    elif FAULT == "releases":
        original = worker.ledger.send_releases  # the claim loop calls it too: not there

        def release_or_raise(**kwargs) -> None:
            if threading.current_thread().name == "homing-releases":
                _raise()
            original(**kwargs)

        worker.ledger.send_releases = release_or_raise
    elif FAULT == "parker":
        from deliveries.worker import parker

        parker.endpoint_deactivate = _raise
        worker.parker.park_later("ep_none", "injected")
    elif FAULT in ("publisher", "counters"):
        if FAULT == "publisher":
            queue.publisher._handle = _raise
            queue.publisher.put([])
        else:
            counters.gatherer._handle = _raise
            counters.gatherer.put(("injected", 0))
    else:
        raise ValueError(f"unknown fault {FAULT!r}")


def _wait_and_break() -> None:
    while True:
        time.sleep(0.05)
        from deliveries import tasks

        if tasks._worker is None or not os.path.exists(TRIGGER):
            continue
        try:
            os.remove(TRIGGER)  # only one process takes it
        except FileNotFoundError:
            continue
        _break(tasks._worker)
        return


def _on_ready(**kwargs) -> None:
    threading.Thread(target=_wait_and_break, name="test-fault", daemon=True).start()


if FAULT:
    from celery.signals import worker_ready

    worker_ready.connect(_on_ready, weak=False)
