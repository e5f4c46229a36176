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

# claim can race with an expiry or a release between SET NX and GET; a few rounds
# always settle it because each lost round means someone else changed the key.
_CLAIM_ATTEMPTS = 5


def _millis(seconds: float) -> int:
    # PX needs a positive integer; round up so a tiny lease never becomes 0.
    return max(1, math.ceil(seconds * 1000))


class RedisStore:
    """Records live at ``prefix + event_id`` and expire by Redis TTL.

    The value is ``in_progress:<owner>`` while claimed and ``done`` once completed.
    Works with clients created with or without ``decode_responses``.
    """

    def __init__(self, redis_client: Any, prefix: str = "homing:dedup:") -> None:
        self._redis = redis_client
        self.prefix = prefix
        self._complete = redis_client.register_script(_COMPLETE_LUA)
        self._release = redis_client.register_script(_RELEASE_LUA)

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
