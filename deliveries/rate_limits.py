"""Per-endpoint `rate_limit`: at most N attempts per wall-clock second, across workers.

With Redis the count for (endpoint, second) is one INCR shared by every worker process;
without it (the embedded set-up, one worker) it is counted in this process. If Redis
does not answer, attempts are let through: a missed limit is better than a stalled queue.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence

import redis
from django.conf import settings

from core.redis import redis_client

logger = logging.getLogger(__name__)

_local_counts: Counter[tuple[str, int]] = Counter()
_local_lock = threading.Lock()


def allowed(*, endpoint_ids: Sequence[str], limits: dict[str, int], second: int) -> list[bool]:
    """For each attempt about to go to `endpoint_ids[i]`: may it go in this second?"""
    limited = [i for i, endpoint in enumerate(endpoint_ids) if endpoint in limits]
    verdict = [True] * len(endpoint_ids)
    if not limited:
        return verdict
    for i, count in zip(limited, _count([endpoint_ids[i] for i in limited], second), strict=True):
        verdict[i] = count <= limits[endpoint_ids[i]]
    return verdict


def _count(endpoint_ids: list[str], second: int) -> list[int]:
    """The running count of attempts to each endpoint in `second`, this one included."""
    if settings.REDIS_URL:
        try:
            pipe = redis_client().pipeline(transaction=False)
            for endpoint in endpoint_ids:
                key = f"homing:rate:{endpoint}:{second}"
                pipe.incr(key)
                pipe.expire(key, 5)
            return pipe.execute()[::2]
        except (redis.RedisError, OSError):
            logger.warning("rate limits unavailable (Redis); letting attempts through")
            return [0] * len(endpoint_ids)
    with _local_lock:
        for key in [k for k in _local_counts if k[1] < second]:
            del _local_counts[key]
        counts = []
        for endpoint in endpoint_ids:
            _local_counts[(endpoint, second)] += 1
            counts.append(_local_counts[(endpoint, second)])
        return counts
