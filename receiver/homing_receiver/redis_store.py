"""A Redis-backed store: atomic across every process and host sharing the server.

Nothing here imports redis: the caller passes a client (``redis.Redis(...)`` from the
``[redis]`` extra), so the core package stays dependency-free.
"""

from __future__ import annotations

import math
from typing import Any

from homing_receiver.dedup import ClaimResult

DONE = "done"
_IN_PROGRESS_PREFIX = "in_progress:"

# complete: mark done only if we still hold the claim, or if our lease lapsed and the
# key vanished (nobody took over, and our handler did run). Another owner's live
# claim is left alone.
_COMPLETE_LUA = """
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] or current == false then
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
    return 1
end
return 0
"""

# release: delete only our own in-progress claim (never someone else's, never "done").
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""

# sequence_see: KEYS = mark, seen (a sorted set scored by sequence); ARGV[1] = sequence.
# Store it if above the mark, then move the mark over every stored sequence that follows
# it without a hole and drop those. One script, so concurrent calls cannot interleave.
# string.format('%d') because tostring() writes large numbers as 1e+14.
_SEE_LUA = """
local mark = tonumber(redis.call('GET', KEYS[1]) or '0')
local sequence = tonumber(ARGV[1])
if sequence <= mark then
    return mark
end
if sequence > mark + 1 then
    redis.call('ZADD', KEYS[2], sequence, string.format('%d', sequence))
    return mark
end
mark = sequence
while redis.call('ZSCORE', KEYS[2], string.format('%d', mark + 1)) do
    mark = mark + 1
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', mark))
redis.call('SET', KEYS[1], string.format('%d', mark))
return mark
"""

# sequence_reset: KEYS as above; ARGV[1] = the new mark. Forget what is stored at or
# below it, then advance over what follows it, as _SEE_LUA does.
_RESET_LUA = """
local mark = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', mark))
while redis.call('ZSCORE', KEYS[2], string.format('%d', mark + 1)) do
    mark = mark + 1
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', mark))
redis.call('SET', KEYS[1], string.format('%d', mark))
return mark
"""

# claim can race with an expiry or a release between SET NX and GET; a few rounds
# always settle it because each lost round means someone else changed the key.
_CLAIM_ATTEMPTS = 5


def _millis(seconds: float) -> int:
    # PX needs a positive integer; round up so a tiny lease never becomes 0.
    return max(1, math.ceil(seconds * 1000))


class RedisStore:
    """Records live at ``prefix + event_id`` and expire by Redis TTL.

    The value is ``in_progress:<owner>`` while claimed and ``done`` once completed.
    An endpoint's sequences live at ``sequence_prefix + "{endpoint_id}:mark"`` (a
    string) and ``...:seen`` (a sorted set); they do not expire. The braces keep both
    keys in one Redis Cluster slot, as a script needs. Works with clients created with
    or without ``decode_responses``.
    """

    def __init__(
        self,
        redis_client: Any,
        prefix: str = "homing:dedup:",
        *,
        sequence_prefix: str = "homing:sequence:",
    ) -> None:
        self._redis = redis_client
        self.prefix = prefix
        self.sequence_prefix = sequence_prefix
        self._complete = redis_client.register_script(_COMPLETE_LUA)
        self._release = redis_client.register_script(_RELEASE_LUA)
        self._see = redis_client.register_script(_SEE_LUA)
        self._reset = redis_client.register_script(_RESET_LUA)

    def claim(self, key: str, owner: str, lease: float) -> ClaimResult:
        name = self.prefix + key
        for _ in range(_CLAIM_ATTEMPTS):
            if self._redis.set(name, _IN_PROGRESS_PREFIX + owner, nx=True, px=_millis(lease)):
                return "claimed"
            current = self._redis.get(name)
            if current is None:
                continue  # expired or released between our SET and GET: try again
            if isinstance(current, bytes):
                current = current.decode()
            return "done" if current == DONE else "in_progress"
        # Only reachable if the key flips on every round; treat it as busy.
        return "in_progress"

    def complete(self, key: str, owner: str, ttl: float) -> bool:
        result = self._complete(
            keys=[self.prefix + key],
            args=[_IN_PROGRESS_PREFIX + owner, DONE, _millis(ttl)],
        )
        return bool(result)

    def release(self, key: str, owner: str) -> None:
        self._release(keys=[self.prefix + key], args=[_IN_PROGRESS_PREFIX + owner])

    def sequence_see(self, endpoint_id: str, sequence: int) -> None:
        self._see(keys=self._sequence_keys(endpoint_id), args=[sequence])

    def sequence_state(self, endpoint_id: str) -> tuple[int, list[int]]:
        mark_key, seen_key = self._sequence_keys(endpoint_id)
        # MULTI/EXEC: both reads see the same moment, between two scripts.
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.get(mark_key)
            pipe.zrange(seen_key, 0, -1)
            mark, seen = pipe.execute()
        return int(mark or 0), sorted(int(member) for member in seen)

    def sequence_reset(self, endpoint_id: str, to: int) -> None:
        self._reset(keys=self._sequence_keys(endpoint_id), args=[to])

    def _sequence_keys(self, endpoint_id: str) -> list[str]:
        base = f"{self.sequence_prefix}{{{endpoint_id}}}"
        return [base + ":mark", base + ":seen"]
