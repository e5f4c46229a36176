"""Monotonic counters shared by every process, for /metrics.

With Redis they are one hash (a restart empties it; Prometheus treats that as a counter
reset). Without Redis (the embedded set-up) they are rows in the database.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally

import redis
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from core.background import Gatherer
from core.models import Counter
from core.redis import redis_client

logger = logging.getLogger(__name__)

REDIS_KEY = "homing:counters"
COUNT_EVERY = 0.1  # seconds `increment_soon` gathers for (a scrape comes every few seconds)


def increment_many(amounts: dict[str, int]) -> None:
    amounts = {name: n for name, n in amounts.items() if n}
    if not amounts:
        return
    try:
        if settings.REDIS_URL:
            pipe = redis_client().pipeline(transaction=False)
            for name, amount in amounts.items():
                pipe.hincrby(REDIS_KEY, name, amount)
            pipe.execute()
        else:
            for name, amount in amounts.items():
                _increment_row(name, amount)
    except (redis.RedisError, OSError):
        # A metric must never fail a delivery or an API call.
        logger.warning("could not update counters %s", sorted(amounts), exc_info=True)


def increment(name: str, amount: int = 1) -> None:
    increment_many({name: amount})


def increment_soon(name: str, amount: int = 1) -> None:
    """`increment` from a background thread (with Redis), so that a request does not wait
    on it; under load many requests' counts are added in one round trip."""
    if settings.REDIS_URL:
        gatherer.put((name, amount))
    else:
        increment(name, amount)  # a row in the caller's own transaction


def flush() -> None:
    """Add what `increment_soon` still holds (tests; the gatherer flushes at exit)."""
    gatherer.flush()


def _add_gathered(counts: list[tuple[str, int]]) -> None:
    tally: Tally[str] = Tally()
    for name, amount in counts:
        tally[name] += amount
    increment_many(tally)


# Its thread is started by the process's owner (core/background.py); until then the
# counting thread adds its counts itself.
gatherer: Gatherer[tuple[str, int]] = Gatherer(
    _add_gathered, name="homing-counters", most=1000, linger=COUNT_EVERY
)


def _increment_row(name: str, amount: int) -> None:
    if Counter.objects.filter(name=name).update(value=F("value") + amount):
        return
    try:
        with transaction.atomic():
            Counter.objects.create(name=name, value=amount)
    except IntegrityError:  # another process created it first
        Counter.objects.filter(name=name).update(value=F("value") + amount)


def read_all() -> dict[str, int]:
    if settings.REDIS_URL:
        raw = redis_client().hgetall(REDIS_KEY)
        # Bytes from this client (no decode_responses); the stubs allow str as well.
        return {
            name.decode() if isinstance(name, bytes) else name: int(value)
            for name, value in raw.items()
        }
    return dict(Counter.objects.values_list("name", "value"))
