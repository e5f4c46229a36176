"""HOMING_ENDPOINT_CONCURRENCY: attempts in flight per endpoint across every worker.

With Redis each endpoint has a sorted set of the deliveries in flight to it, scored by
when their hold lapses (Redis's clock plus the delivery's lease): one script per claim
batch drops lapsed members (a worker that died gives its slots back that way), then
admits deliveries while the set is under the cap. A finished attempt removes its member.
Without Redis (the embedded set-up, one worker) the worker's own per-endpoint slots
enforce the same cap. If Redis does not answer, attempts are let through: a missed cap is
better than a stalled queue.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis
from django.conf import settings

from core.redis import redis_client

logger = logging.getLogger(__name__)

KEY = "homing:inflight:{}"

# KEYS: one set per delivery (its endpoint's); ARGV: cap, lease seconds, then the
# delivery ids. Returns 1 (admitted) or 0 per delivery.
_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local cap = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local out = {}
local swept = {}
for i, key in ipairs(KEYS) do
  if not swept[key] then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    swept[key] = true
  end
  if redis.call('ZCARD', key) < cap then
    redis.call('ZADD', key, now + lease, ARGV[i + 2])
    redis.call('PEXPIRE', key, math.ceil(lease * 1000))
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
"""

_script: redis.commands.core.Script | None = None


def acquire(
    *, endpoint_ids: Sequence[str], delivery_ids: Sequence[str], lease_seconds: float
) -> list[bool]:
    """For each delivery about to be sent to `endpoint_ids[i]`: may it go now?"""
    if not delivery_ids or not settings.REDIS_URL:
        return [True] * len(delivery_ids)
    global _script
    try:
        if _script is None:
            _script = redis_client().register_script(_SCRIPT)
        answers = _script(
            keys=[KEY.format(e) for e in endpoint_ids],
            args=[settings.HOMING_ENDPOINT_CONCURRENCY, lease_seconds, *delivery_ids],
        )
        return [bool(a) for a in answers]
    except (redis.RedisError, OSError):
        logger.warning("endpoint concurrency unavailable (Redis); letting attempts through")
        return [True] * len(delivery_ids)


def release(*, endpoint_id: str, delivery_id: str) -> None:
    if not settings.REDIS_URL:
        return
    try:
        redis_client().zrem(KEY.format(endpoint_id), delivery_id)
    except (redis.RedisError, OSError):
        # Its member lapses with the lease.
        logger.warning("could not release an endpoint slot (Redis)", exc_info=True)
