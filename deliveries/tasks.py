"""Celery entry points: take ids, call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_shutting_down
from django.conf import settings
from django.db import DatabaseError, connection

from deliveries.queue import DELIVER_TASK, RETRY_WHEN_FREE_TASK
from deliveries.services.attempts import deliveries_attempt, pipeline
from deliveries.services.lifecycle import delivery_retry_when_free


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver(delivery_ids: list[str]) -> None:
    try:
        deliveries_attempt(delivery_ids=delivery_ids)
    except DatabaseError:
        # Connections outlive tasks (CELERY_DB_REUSE_MAX); drop a broken one (e.g.
        # PostgreSQL restarted) so the next task reconnects. The scheduler re-publishes.
        connection.close()
        raise


@shared_task(name=RETRY_WHEN_FREE_TASK, ignore_result=True)
def retry_when_free(delivery_id: str, tries_left: int) -> None:
    delivery_retry_when_free(delivery_id=delivery_id, tries_left=tries_left)


@worker_shutting_down.connect
def finish_attempts_under_way(**kwargs: Any) -> None:
    # A warm shutdown lets sends under way finish and be recorded, so a deploy does not
    # turn them into 'worker lost' retries.
    if pipeline.cache_info().currsize:  # this process has sent something
        pipeline().drain(timeout=settings.HOMING_DELIVERY_TIMEOUT + 5)
