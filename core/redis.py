"""The process's Redis client for Homing's own keys (counters, rate limits, doorbell).

Short timeouts: every caller treats Redis as optional and carries on without it, so a
stalled Redis must cost a second, not a delivery.
"""

from __future__ import annotations

import functools

import redis
from django.conf import settings


@functools.cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
