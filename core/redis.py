"""The process's Redis client for Homing's own keys (counters, rate limits, doorbell).

Short timeouts: every caller treats Redis as optional and carries on without it, so a
stalled Redis must cost a second, not a delivery.
"""

from __future__ import annotations

import contextlib
import functools

import redis
from django.conf import settings
from django.core.cache import cache


@functools.cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)


def once_claim(key: str, *, ttl_seconds: int) -> bool:
    """True for the first caller until `once_release(key)` or the TTL; False for the rest.

    SET NX in Redis (shared by every process); the process-local cache without Redis (the
    embedded set-up runs one web process). If Redis fails this answers True: doing the
    work twice is better than never.
    """
    if not settings.REDIS_URL:
        return bool(cache.add(key, 1, timeout=ttl_seconds))
    try:
        return bool(redis_client().set(key, 1, nx=True, ex=ttl_seconds))
    except (redis.RedisError, OSError):
        return True


def once_release(key: str) -> None:
    if not settings.REDIS_URL:
        cache.delete(key)
        return
    with contextlib.suppress(redis.RedisError, OSError):  # if not, the TTL frees it
        redis_client().delete(key)
