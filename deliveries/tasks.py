"""Celery entry points: take ids, call one service. Celery is the worker's wake-up bus
and process model; the `Worker` (deliveries/worker/) does the delivering."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from core import tracing
from deliveries.lifecycle.endpoint_backlogs import CLEAR_TASK, endpoint_backlog_run
from deliveries.lifecycle.interventions import delivery_retry_when_free
from deliveries.wakeups import DELIVER_TASK, RETRY_WHEN_FREE_TASK
from deliveries.worker.worker import Worker

# The process's worker, created when Celery is ready (None in web processes and tests).
_worker: Worker | None = None


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver(delivery_ids: list[str]) -> None:
    # The worker's claim loop claims and sends; the message only wakes it.
    if _worker is not None:
        _worker.wake()


@shared_task(name=RETRY_WHEN_FREE_TASK, ignore_result=True)
def retry_when_free(delivery_id: str, tries_left: int) -> None:
    delivery_retry_when_free(delivery_id=delivery_id, tries_left=tries_left)


@shared_task(name=CLEAR_TASK, ignore_result=True)
def endpoint_backlog_task(endpoint_id: str) -> None:
    # acks_late: a worker killed midway gets the message redelivered; the scheduler's
    # sweep also carries on whatever is left (the endpoint row says what).
    endpoint_backlog_run(endpoint_id=endpoint_id)


@worker_ready.connect
def start_worker(**kwargs: Any) -> None:
    # Start claiming at once: due work may be waiting with no message.
    global _worker
    tracing.tracing_start(service="homing-worker")  # when OTEL_* ask for it (core/tracing.py)
    _worker = Worker().start()


@worker_shutdown.connect
def finish_attempts_under_way(**kwargs: Any) -> None:
    # A warm shutdown lets sends under way finish and be recorded, so a deploy does not
    # turn them into 'worker lost' retries. `worker_shutdown` is sent once, from the
    # main loop after Celery's SIGTERM handler returned (not inside the handler, as
    # `worker_shutting_down` is), so a second SIGTERM cannot re-enter it.
    if _worker is not None:
        _worker.stop()
        _worker.drain(timeout=settings.HOMING_DELIVERY_TIMEOUT + 5)
        _worker.close()
    tracing.tracing_close()  # the spans still queued, within its bound
