"""Publishing delivery work to Celery, by task name so nothing here imports the tasks.

A message only says "look at these deliveries now"; the database decides whether they
are due and who owns them, so a lost, late or repeated message is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction

from config.celery import app

logger = logging.getLogger(__name__)

DELIVER_TASK = "deliveries.deliver"


def publish_deliveries(delivery_ids: Sequence[str]) -> None:
    try:
        app.send_task(DELIVER_TASK, args=[list(delivery_ids)])
    except Exception:
        # The broker is down: the scheduler's sweep finds these deliveries in the
        # database once their dispatch mark lapses, so log and carry on.
        logger.warning(
            "could not publish %d deliveries; the sweep will", len(delivery_ids), exc_info=True
        )


def publish_deliveries_on_commit(delivery_ids: Sequence[str]) -> None:
    if delivery_ids:
        ids = list(delivery_ids)
        transaction.on_commit(lambda: publish_deliveries(ids))
