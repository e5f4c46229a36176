"""Celery entry points: take ids, call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings

from deliveries.queue import DELIVER_TASK, RETRY_WHEN_FREE_TASK
from deliveries.services.attempts import pipeline
from deliveries.services.dispatcher import dispatcher
from deliveries.services.lifecycle import delivery_retry_when_free


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver(delivery_ids: list[str]) -> None:
    # The dispatcher thread claims and sends; the message only wakes it.
    dispatcher().wake(delivery_ids)


@shared_task(name=RETRY_WHEN_FREE_TASK, ignore_result=True)
def retry_when_free(delivery_id: str, tries_left: int) -> None:
    delivery_retry_when_free(delivery_id=delivery_id, tries_left=tries_left)


@worker_ready.connect
def start_dispatching(**kwargs: Any) -> None:
    # Start claiming at once: due work may be waiting with no message (see dispatcher.py).
    dispatcher()


_shutdown_started = False


@worker_shutting_down.connect
def finish_attempts_under_way(**kwargs: Any) -> None:
    # A warm shutdown lets sends under way finish and be recorded, so a deploy does not
    # turn them into 'worker lost' retries.
    #
    # Celery calls this from its SIGTERM handler, and a second SIGTERM (run_worker
    # forwards the one its process group also got) re-enters it mid-call: taking a lock
    # the interrupted call holds would deadlock the worker, so only the first call acts.
    global _shutdown_started
    if _shutdown_started:
        return
    _shutdown_started = True
    if dispatcher.cache_info().currsize:
        dispatcher().stop()
    if pipeline.cache_info().currsize:  # this process has sent something
        pipeline().drain(timeout=settings.HOMING_DELIVERY_TIMEOUT + 5)
