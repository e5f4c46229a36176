"""HOMING_ENDPOINT_CONCURRENCY: attempts in flight per endpoint across every worker.

With Redis each endpoint has a sorted set of the deliveries in flight to it, scored by
when their hold lapses (Redis's clock plus the delivery's lease): one script per claim
batch drops lapsed members (a worker that died gives its slots back that way), then
admits deliveries while the set is under the cap. A finished attempt removes its member.
Without Redis (the embedded set-up, one worker) the same rules hold in this process
(concurrency_local.py: the same sets, leases and ramps, in memory). If Redis does not answer,
attempts are let through: a missed cap is better than a stalled queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import redis
from django.conf import settings

from core.redis import redis_client
from deliveries.worker.concurrency_local import LocalConcurrency

logger = logging.getLogger(__name__)

KEY = "homing:inflight:{}"
RAMP_KEY = "homing:ramp:{}"
# The worker processes sending now, scored by when each last said so (Redis's clock).
WORKERS_KEY = "homing:workers"
RAMP_START = 2  # in flight at once to an endpoint whose circuit just closed
RAMP_SECONDS = 600  # a ramp not grown out within this is forgotten

# KEYS: per delivery, its endpoint's set then its ramp key; ARGV: cap, lease seconds,
# then the delivery ids. Returns 1 (admitted) or 0 per delivery. A ramp key (set when a
# circuit closes, doubled per successful batch) lowers the endpoint's cap for a while.
_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local cap = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local out = {}
local swept = {}
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1]
  if not swept[key] then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    swept[key] = true
  end
  local limit = math.min(cap, tonumber(redis.call('GET', KEYS[2 * i]) or cap))
  if redis.call('ZCARD', key) < limit then
    redis.call('ZADD', key, now + lease, ARGV[i + 2])
    redis.call('PEXPIRE', key, math.ceil(lease * 1000))
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
"""

# KEYS: per endpoint, its set then its ramp key; ARGV: cap. Returns each endpoint's room:
# how many more of its deliveries `acquire` would admit now.
_ROOM_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local cap = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS / 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[2 * i - 1], '-inf', now)
  local limit = math.min(cap, tonumber(redis.call('GET', KEYS[2 * i]) or cap))
  out[i] = math.max(0, limit - redis.call('ZCARD', KEYS[2 * i - 1]))
end
return out
"""

# KEYS: per hand-over, its endpoint's set; ARGV: lease seconds, then per hand-over the
# finished delivery and the one that took its slot. The count never changes.
_HAND_OVER_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local lease = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZREM', KEYS[i], ARGV[2 * i])
  redis.call('ZADD', KEYS[i], now + lease, ARGV[2 * i + 1])
  redis.call('PEXPIRE', KEYS[i], math.ceil(lease * 1000))
end
return #KEYS
"""

# KEYS: the workers' set; ARGV: this worker's name, 1 (it sends) or 0 (it stopped), how
# many seconds a worker stays counted without saying so again. Returns how many count.
_WORKERS_SCRIPT = """
local now = tonumber(redis.call('TIME')[1])
local within = tonumber(ARGV[3])
if ARGV[2] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - within)
redis.call('EXPIRE', KEYS[1], within)
return redis.call('ZCARD', KEYS[1])
"""

# KEYS: per attempt, its endpoint's set; ARGV: lease seconds, then per attempt its
# delivery. Each member still there is held a lease from now (one that lapsed stays out).
_RENEW_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local lease = tonumber(ARGV[1])
local renewed = 0
for i = 1, #KEYS do
  local lapses = redis.call('ZSCORE', KEYS[i], ARGV[i + 1])
  if lapses and tonumber(lapses) > now then
    redis.call('ZADD', KEYS[i], now + lease, ARGV[i + 1])
    redis.call('PEXPIRE', KEYS[i], math.ceil(lease * 1000))
    renewed = renewed + 1
  end
end
return renewed
"""

_script: redis.commands.core.Script | None = None
_renew_script: redis.commands.core.Script | None = None
_workers_script: redis.commands.core.Script | None = None
_room_script: redis.commands.core.Script | None = None
_hand_over_script: redis.commands.core.Script | None = None


_local = LocalConcurrency(ramp_start=RAMP_START, ramp_seconds=RAMP_SECONDS)


def rooms(*, endpoint_ids: Sequence[str]) -> dict[str, int]:
    """How many more attempts each endpoint may have in flight across the cluster now
    (one round trip for them all); the cap itself without Redis or if it does not answer."""
    cap = settings.HOMING_ENDPOINT_CONCURRENCY
    if not settings.REDIS_URL:
        return _local.rooms(endpoint_ids, cap)
    if not endpoint_ids:
        return {}
    global _room_script
    try:
        if _room_script is None:
            _room_script = redis_client().register_script(_ROOM_SCRIPT)
        answers = _room_script(
            keys=[k for e in endpoint_ids for k in (KEY.format(e), RAMP_KEY.format(e))],
            args=[cap],
        )
        return {e: int(a) for e, a in zip(endpoint_ids, answers, strict=True)}
    except (redis.RedisError, OSError):
        logger.warning("endpoint concurrency unavailable (Redis); assuming room")
        return dict.fromkeys(endpoint_ids, cap)


def acquire(
    *, endpoint_ids: Sequence[str], delivery_ids: Sequence[str], lease_seconds: float
) -> list[bool]:
    """For each delivery about to be sent to `endpoint_ids[i]`: may it go now?"""
    if not settings.REDIS_URL:
        return _local.acquire(
            endpoint_ids, delivery_ids, settings.HOMING_ENDPOINT_CONCURRENCY, lease_seconds
        )
    if not delivery_ids:
        return []
    global _script
    try:
        if _script is None:
            _script = redis_client().register_script(_SCRIPT)
        answers = _script(
            keys=[k for e in endpoint_ids for k in (KEY.format(e), RAMP_KEY.format(e))],
            args=[settings.HOMING_ENDPOINT_CONCURRENCY, lease_seconds, *delivery_ids],
        )
        return [bool(a) for a in answers]
    except (redis.RedisError, OSError):
        logger.warning("endpoint concurrency unavailable (Redis); letting attempts through")
        return [True] * len(delivery_ids)


def release(*, endpoint_id: str, delivery_id: str) -> None:
    release_many(finished=[(endpoint_id, delivery_id)])


def release_many(*, finished: Sequence[tuple[str, str]]) -> None:
    """These (endpoint, delivery) attempts are over: one round trip for them all."""
    if not settings.REDIS_URL:
        _local.release(finished)
        return
    if not finished:
        return
    members: dict[str, list[str]] = {}
    for endpoint_id, delivery_id in finished:
        members.setdefault(endpoint_id, []).append(delivery_id)
    try:
        pipeline = redis_client().pipeline(transaction=False)
        for endpoint_id, delivery_ids in members.items():
            pipeline.zrem(KEY.format(endpoint_id), *delivery_ids)
        pipeline.execute()
    except (redis.RedisError, OSError):
        # Their members lapse with the lease.
        logger.warning("could not release endpoint slots (Redis)", exc_info=True)


def hand_over(*, handed: Sequence[tuple[str, str, str]], lease_seconds: float) -> None:
    """Each (endpoint, finished delivery, next delivery): the next one took the finished
    one's slot without asking (the worker sent it as the other's answer came), so the
    endpoint's count stays; its hold lapses a lease from now. One round trip for all."""
    if not settings.REDIS_URL:
        _local.hand_over(handed, lease_seconds)
        return
    if not handed:
        return
    global _hand_over_script
    try:
        if _hand_over_script is None:
            _hand_over_script = redis_client().register_script(_HAND_OVER_SCRIPT)
        _hand_over_script(
            keys=[KEY.format(endpoint_id) for endpoint_id, _, _ in handed],
            args=[lease_seconds, *(d for _, finished, then in handed for d in (finished, then))],
        )
    except (redis.RedisError, OSError):
        # The finished ones' members lapse with their lease; the next ones go uncounted.
        logger.warning("could not hand endpoint slots over (Redis)", exc_info=True)


def endpoints_answered_received(
    *, recovered: Sequence[str], succeeded: Sequence[str], **_: Any
) -> None:
    """Lifecycle's word after a recorded batch (deliveries.signals.endpoints_answered):
    a recovered endpoint starts its ramp, a succeeding one grows it."""
    for endpoint_id in recovered:
        ramp_start(endpoint_id=endpoint_id)
    if succeeded:
        ramp_grow(endpoint_ids=list(succeeded))


def ramp_start(*, endpoint_id: str) -> None:
    """A recovered endpoint starts at RAMP_START in flight rather than the full cap."""
    if not settings.REDIS_URL:
        _local.ramp_start(endpoint_id)
        return
    _ramp(lambda client: client.set(RAMP_KEY.format(endpoint_id), RAMP_START, ex=RAMP_SECONDS))


def ramp_grow(*, endpoint_ids: list[str]) -> None:
    """Successes double a ramping endpoint's cap; at the full cap the ramp ends."""
    if not settings.REDIS_URL:
        _local.ramp_grow(endpoint_ids, settings.HOMING_ENDPOINT_CONCURRENCY)
        return

    def grow(client: redis.Redis) -> None:
        keys = [RAMP_KEY.format(e) for e in endpoint_ids]
        for key, value in zip(keys, client.mget(keys), strict=True):
            if value is None:
                continue  # not ramping: the common case, one MGET per batch
            if int(value) * 2 >= settings.HOMING_ENDPOINT_CONCURRENCY:
                client.delete(key)
            else:
                client.set(key, int(value) * 2, ex=RAMP_SECONDS, xx=True)

    _ramp(grow)


def _ramp(action: Callable[[redis.Redis], object]) -> None:
    try:
        action(redis_client())
    except (redis.RedisError, OSError):
        logger.warning("could not update a recovering endpoint's ramp (Redis)", exc_info=True)


def renew(*, held: Sequence[tuple[str, str]], lease_seconds: float) -> None:
    """These (endpoint, delivery) attempts are still under way: their places are held a
    lease from now, as their database leases are (an attempt outliving its first lease
    kept counting against the cap). One round trip for them all."""
    if not settings.REDIS_URL:
        _local.renew(held, lease_seconds)
        return
    if not held:
        return
    global _renew_script
    try:
        if _renew_script is None:
            _renew_script = redis_client().register_script(_RENEW_SCRIPT)
        _renew_script(
            keys=[KEY.format(endpoint_id) for endpoint_id, _ in held],
            args=[lease_seconds, *(delivery_id for _, delivery_id in held)],
        )
    except (redis.RedisError, OSError):
        logger.warning("could not renew endpoint slots (Redis)", exc_info=True)


def workers_sending(*, worker: str, sending: bool = True, within: float = 10.0) -> int:
    """How many worker processes send now, `worker` included (`sending`) or not (it is
    stopping): each says so again more often than every `within` seconds, and one that
    stops saying so (a crash) stops counting after that. Each endpoint's cap is shared
    between them (worker.py). 1 without Redis, or if it does not answer."""
    if not settings.REDIS_URL:
        return 1
    global _workers_script
    try:
        if _workers_script is None:
            _workers_script = redis_client().register_script(_WORKERS_SCRIPT)
        counted = _workers_script(
            keys=[WORKERS_KEY], args=[worker, 1 if sending else 0, max(1, int(within))]
        )
    except (redis.RedisError, OSError):
        logger.warning("could not count the workers sending (Redis)", exc_info=True)
        return 1
    return max(1, int(counted))
