"""The worker's warm shutdown runs once, outside Celery's signal handler."""

from __future__ import annotations

from celery.signals import worker_shutdown, worker_shutting_down

from deliveries import tasks


def test_the_drain_is_connected_to_worker_shutdown_not_the_signal_handler() -> None:
    # worker_shutting_down is sent from inside the SIGTERM handler, where a second
    # SIGTERM could re-enter it; worker_shutdown is sent once, from the main loop.
    receivers = [r[1]() for r in worker_shutdown.receivers]
    assert tasks.finish_attempts_under_way in receivers
    assert tasks.finish_attempts_under_way not in [r[1]() for r in worker_shutting_down.receivers]
