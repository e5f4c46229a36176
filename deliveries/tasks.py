"""Celery entry points: take ids, call one service."""

from __future__ import annotations

from celery import shared_task

from deliveries.queue import DELIVER_TASK
from deliveries.services.attempts import deliveries_attempt


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver(delivery_ids: list[str]) -> int:
    return len(deliveries_attempt(delivery_ids=delivery_ids))
