"""Login throttling: too many failed sign-ins from one address or for one username wait.

After MAX_FAILURES failures within WINDOW_SECONDS (counted from the first), every further
attempt from that address or for that username is refused, the right password included,
until the window ends. Refused attempts are not counted, so the wait does not grow.
A success clears its username's count but not its address's: an attacker who owns one
account must not be able to reset the count of the address they guess from.

Counts live in Redis when REDIS_URL is set (shared by every web process); without it in
Django's default cache, local to each web process (the embedded set-up). If Redis fails,
logins are let through: throttling slows guessing, it must not lock every operator out.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time

import redis
from django.conf import settings
from django.core.cache import cache

from core.redis import redis_client

logger = logging.getLogger(__name__)

MAX_FAILURES = 5  # a typo or two, a forgotten caps lock; not a dictionary
WINDOW_SECONDS = 15 * 60
KEY_PREFIX = "homing:login-failures"


def login_wait(*, address: str, username: str) -> int:
    """Seconds the next attempt must wait (0: it may go ahead)."""
    return max((_wait(key) for key in _keys(address=address, username=username)), default=0)


def login_failure_record(*, address: str, username: str) -> None:
    for key in _keys(address=address, username=username):
        _count(key)


def login_success_record(*, username: str) -> None:
    for key in _keys(address="", username=username):
        _forget(key)


def _keys(*, address: str, username: str) -> list[str]:
    # Hashed: both come from the request, so they are hostile bytes of any length.
    keys = []
    if address:
        keys.append(f"{KEY_PREFIX}:address:{_digest(address)}")
    if username.strip():
        keys.append(f"{KEY_PREFIX}:user:{_digest(username.strip().casefold())}")
    return keys


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# --- the two stores: Redis (shared), Django's cache (this process) -----------------------


def _count(key: str) -> None:
    if not settings.REDIS_URL:
        failures, ends_at = cache.get(key) or (0, time.time() + WINDOW_SECONDS)
        cache.set(key, (failures + 1, ends_at), timeout=max(1, int(ends_at - time.time())))
        return
    try:
        pipe = redis_client().pipeline(transaction=True)
        pipe.set(key, 0, nx=True, ex=WINDOW_SECONDS)  # the window starts at the first failure
        pipe.incr(key)
        pipe.execute()
    except (redis.RedisError, OSError):
        logger.warning("could not count a failed login", exc_info=True)


def _wait(key: str) -> int:
    if not settings.REDIS_URL:
        failures, ends_at = cache.get(key) or (0, 0.0)
        remaining = ends_at - time.time()
        return math.ceil(remaining) if failures >= MAX_FAILURES and remaining > 0 else 0
    try:
        pipe = redis_client().pipeline(transaction=True)
        pipe.get(key)
        pipe.ttl(key)
        failures, ttl = pipe.execute()
    except (redis.RedisError, OSError):
        logger.warning("could not read failed logins; letting this one through", exc_info=True)
        return 0
    return max(1, int(ttl)) if failures is not None and int(failures) >= MAX_FAILURES else 0


def _forget(key: str) -> None:
    if not settings.REDIS_URL:
        cache.delete(key)
        return
    try:
        redis_client().delete(key)
    except (redis.RedisError, OSError):
        logger.warning("could not clear failed logins", exc_info=True)
