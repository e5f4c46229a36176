"""Wake-ups: the doorbell and the Celery messages that tell workers to look for due work
(by task name, so nothing here imports the tasks; the database is the queue).

A message only says "wake up, look for due work" (the worker finds the deliveries it
names through their endpoint, not by id), and the database decides whether they are due
and who owns them, so a lost, late or repeated message is harmless: due deliveries are
also found by idle workers' poll and the scheduler's sweep.

The fast path after an API commit hands ids to a background publisher thread, which
sends whatever has gathered as one message: a request does not wait on the broker.

It rings a doorbell first: a Redis key set with NX while a wake-up message is on its
way. If the key is already up, no message is sent: the worker that takes the pending
message clears the key *before* it claims, and claims every due delivery, so it finds
these too. Under load, then, thousands of commits cost a handful of messages instead
of one each (a message cost a worker more CPU than the webhook it announced). The key
expires by itself, so a lost message holds back the fast path for DOORBELL_TTL_MS at most
(and idle workers poll the database meanwhile).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

import redis
from django.conf import settings
from django.db import transaction

from core.background import Gatherer
from core.celery import app
from core.redis import redis_client

logger = logging.getLogger(__name__)

DELIVER_TASK = "deliveries.deliver"
RETRY_WHEN_FREE_TASK = "deliveries.retry_when_free"
MESSAGE_SIZE = 100  # deliveries named in one message at most
DOORBELL_KEY = "homing:doorbell"
DOORBELL_TTL_MS = 1000
# Seconds the publisher gathers commits for before it rings: under load one doorbell
# round trip serves a few commits instead of one each, for 2 ms more latency.
WAKE_AFTER = 0.002


def publish_deliveries(delivery_ids: Sequence[str]) -> None:
    try:
        app.send_task(DELIVER_TASK, args=[list(delivery_ids)])
    except Exception:
        # The broker is down: idle workers find due deliveries in the database by
        # themselves (their poll), so log and carry on.
        logger.warning(
            "could not publish %d deliveries; workers will find them by polling",
            len(delivery_ids),
            exc_info=True,
        )


def wake_workers(delivery_ids: Sequence[str]) -> None:
    """Publish these deliveries unless a wake-up message is already on its way."""
    if _doorbell_rung():
        publish_deliveries(delivery_ids)


def doorbell_answered() -> None:
    """A worker took a wake-up message and is about to claim: let the next commit ring."""
    if settings.REDIS_URL:
        with contextlib.suppress(redis.RedisError, OSError):  # it expires by itself anyway
            redis_client().delete(DOORBELL_KEY)


def _doorbell_rung() -> bool:
    """True when this call raised the doorbell (so it must send the message)."""
    if not settings.REDIS_URL:
        return True  # the embedded set-up: one message per commit batch
    try:
        return bool(redis_client().set(DOORBELL_KEY, 1, nx=True, px=DOORBELL_TTL_MS))
    except (redis.RedisError, OSError):
        return True  # publish anyway: a redundant message is harmless


def publish_retry_when_free(delivery_id: str, *, tries_left: int) -> None:
    """Ask again in a second whether an in-flight delivery is free for a manual retry."""
    try:
        app.send_task(RETRY_WHEN_FREE_TASK, args=[delivery_id, tries_left], countdown=1)
    except Exception:
        logger.warning("could not schedule the retry of %s", delivery_id, exc_info=True)


def publish_deliveries_on_commit(delivery_ids: Sequence[str]) -> None:
    if delivery_ids:
        ids = list(delivery_ids)
        transaction.on_commit(lambda: publisher.put(ids))


def _publish_gathered(gathered: list[list[str]]) -> None:
    # One wake-up for them all: the worker it wakes claims every due delivery. The ids
    # it names (some of them) only say, in logs, what woke it.
    wake_workers([delivery_id for ids in gathered for delivery_id in ids][:MESSAGE_SIZE])


# Its thread is started by the process's owner (core/background.py); until then the
# committing thread publishes itself.
publisher: Gatherer[list[str]] = Gatherer(
    _publish_gathered, name="homing-publisher", most=1000, linger=WAKE_AFTER
)
