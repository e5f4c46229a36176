"""The relay as a Celery task, for apps that already run Celery.

Celery imports this module through autodiscover_tasks(); nothing else does, so apps
without Celery never import it. Schedule it with beat every few seconds:

    CELERY_BEAT_SCHEDULE = {
        "homing-relay": {"task": "homing_client.relay_outbox", "schedule": 5.0},
    }
"""

from __future__ import annotations

from celery import shared_task

from homing_client.django.relay import outbox_relay_pending


@shared_task(name="homing_client.relay_outbox", ignore_result=True)
def relay_outbox(batch_size: int = 100, max_seconds: float = 50) -> dict[str, int]:
    # Overlapping runs are safe: rows are claimed with SKIP LOCKED.
    result = outbox_relay_pending(batch_size=batch_size, max_seconds=max_seconds)
    return {"sent": result.sent, "failed": result.failed, "claimed": result.claimed}
