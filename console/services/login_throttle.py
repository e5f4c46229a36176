"""Login throttling: too many failed sign-ins from one address or for one username wait.

After MAX_FAILURES failures within WINDOW_SECONDS (counted from the first), every further
attempt from that address or for that username is refused, the right password included,
until the window ends. Refused attempts are not counted, so the wait does not grow.

An attempt is counted as a failure before its password is checked, in one atomic step
with the check that it may go ahead (`login_attempt_take`): counted after the check, the
guesses that arrive together all passed it, about 8 a window instead of 5. A success
then takes its own count back from its address and clears its username's count, but not
the address's: an attacker who owns one account must not be able to reset the count of
the address they guess from.

Counts live in Redis when REDIS_URL is set (shared by every web process); without it in
Django's default cache, local to each web process (the embedded set-up). If Redis fails,
logins are let through: throttling slows guessing, it must not lock every operator out.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time

import redis
from django.conf import settings
from django.core.cache import cache

from core.redis import redis_client

logger = logging.getLogger(__name__)

MAX_FAILURES = 5  # a typo or two, a forgotten caps lock; not a dictionary
WINDOW_SECONDS = 15 * 60
KEY_PREFIX = "homing:login-failures"


def login_attempt_take(*, address: str, username: str) -> int:
    """Count an attempt as a failure and return 0, or return the seconds it must wait
    (counting nothing) when its address or username has MAX_FAILURES already."""
    keys = _keys(address=address, username=username)
    if not keys:
        return 0
    if not settings.REDIS_URL:
        return _local_take(keys)
    try:
        take = redis_client().register_script(_TAKE)  # EVALSHA, loaded once per server
        return int(take(keys=keys, args=[MAX_FAILURES, WINDOW_SECONDS]))
    except (redis.RedisError, OSError):
        logger.warning("could not count a login attempt; letting it through", exc_info=True)
        return 0


def login_success_record(*, address: str, username: str) -> None:
    """The attempt from `address` succeeded: take its count back, forget the username's."""
    for key in _keys(address=address, username=""):
        _uncount(key)
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

# KEYS: the attempt's counters. ARGV: MAX_FAILURES, WINDOW_SECONDS. Refused (the longest
# wait of a full counter) or counted in every counter, a window starting at its first.
_TAKE = """
local wait = 0
for _, key in ipairs(KEYS) do
  local failures = tonumber(redis.call('GET', key) or '0')
  if failures >= tonumber(ARGV[1]) then
    wait = math.max(wait, redis.call('TTL', key), 1)
  end
end
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call('SET', key, 0, 'NX', 'EX', ARGV[2])
  redis.call('INCR', key)
end
return 0
"""
# A success gives its count back; a counter that has expired meanwhile stays gone.
_UNCOUNT = """
if redis.call('EXISTS', KEYS[1]) == 1 and tonumber(redis.call('GET', KEYS[1])) > 0 then
  redis.call('DECR', KEYS[1])
end
"""
# Django's local-memory cache is this process's: a lock makes its check-and-count atomic.
_local_lock = threading.Lock()


def _local_take(keys: list[str]) -> int:
    with _local_lock:
        now = time.time()
        entries = [cache.get(key) or (0, now + WINDOW_SECONDS) for key in keys]
        waits = [
            math.ceil(ends_at - now)
            for failures, ends_at in entries
            if failures >= MAX_FAILURES and ends_at > now
        ]
        if waits:
            return max(waits)
        for key, (failures, ends_at) in zip(keys, entries, strict=True):
            if ends_at <= now:  # a window that has passed starts again
                failures, ends_at = 0, now + WINDOW_SECONDS
            cache.set(key, (failures + 1, ends_at), timeout=max(1, math.ceil(ends_at - now)))
        return 0


def _uncount(key: str) -> None:
    if not settings.REDIS_URL:
        with _local_lock:
            entry = cache.get(key)
            if entry is not None and entry[0] > 0:
                timeout = max(1, math.ceil(entry[1] - time.time()))
                cache.set(key, (entry[0] - 1, entry[1]), timeout=timeout)
        return
    try:
        redis_client().eval(_UNCOUNT, 1, key)
    except (redis.RedisError, OSError):
        logger.warning("could not take back a login attempt", exc_info=True)


def _forget(key: str) -> None:
    if not settings.REDIS_URL:
        with _local_lock:
            cache.delete(key)
        return
    try:
        redis_client().delete(key)
    except (redis.RedisError, OSError):
        logger.warning("could not clear failed logins", exc_info=True)
