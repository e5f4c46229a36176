"""Per-endpoint `rate_limit` as a sliding window with even spacing, across workers (GCRA).

Each endpoint has a theoretical arrival time (TAT): the earliest moment its next attempt
may be sent. An attempt gets `max(now, TAT)` as its send time and pushes the TAT one
interval on. The interval is slightly wider than 1/rate (SPACING_MARGIN), so attempts
are at least that far apart and no 1-second window, wherever it starts, holds more than
`rate_limit` of them, even after a few milliseconds of jitter between worker and
receiver. (Counting per calendar second let 2x through across a second boundary.)

With Redis, one Lua script per claim batch assigns every delivery its send time from
Redis's own clock, so all workers on all machines share one schedule. Only send times
within `hold` seconds are handed out (the worker holds those attempts until then); the
rest are refused without moving the TAT, so a refused attempt never wastes a slot, and
the answer says how long to wait. Without Redis (the embedded set-up) the same rule holds
in this process. If Redis does not answer, attempts are let through: a missed limit is
better than a stalled queue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import redis
from django.conf import settings

from core.redis import redis_client

logger = logging.getLogger(__name__)

# interval = SPACING_MARGIN / rate_limit: 100 ms of slack per second at any rate, for the
# jitter between a worker's timer and the receiver's clock (measured: with 1.05, a loaded
# machine let 21-22 through in a second at rate_limit 20).
SPACING_MARGIN = 1.1
KEY = "homing:gcra:{}"

# KEYS: one TAT key per endpoint; ARGV: hold, then (interval, count) per key.
# Returns one number per attempt, as text (Lua numbers are truncated to integers on the
# way out): >= 0 the delay before sending it; < 0 refused, retry after -value seconds.
_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local hold = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i])
  local count = tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  for _ = 1, count do
    local delay = tat - now
    if delay <= hold then
      out[#out + 1] = string.format('%.6f', delay)
      tat = tat + interval
    else
      out[#out + 1] = string.format('%.6f', -delay)
    end
  end
  redis.call('SET', key, string.format('%.6f', tat), 'PX', math.ceil((tat - now) * 1000) + 5000)
end
return out
"""

_local_tat: dict[str, float] = {}
_local_lock = threading.Lock()
_script: redis.commands.core.Script | None = None


def interval(rate_limit: int) -> float:
    return SPACING_MARGIN / rate_limit


def send_delays(*, endpoint_ids: Sequence[str], limits: dict[str, int], hold: float) -> list[float]:
    """For each attempt about to go to `endpoint_ids[i]`: the seconds to wait before
    sending it (0 for an endpoint without a limit), or a negative number: not now,
    ask again in -value seconds."""
    delays = [0.0] * len(endpoint_ids)
    positions: dict[str, list[int]] = {}
    for i, endpoint in enumerate(endpoint_ids):
        if limits.get(endpoint):
            positions.setdefault(endpoint, []).append(i)
    if not positions:
        return delays
    endpoints = sorted(positions)
    answers = _assign(endpoints, [len(positions[e]) for e in endpoints], limits, hold)
    flat = iter(answers)
    for endpoint in endpoints:
        for i in positions[endpoint]:
            delays[i] = next(flat)
    return delays


def _assign(
    endpoints: list[str], counts: list[int], limits: dict[str, int], hold: float
) -> list[float]:
    if settings.REDIS_URL:
        global _script
        try:
            if _script is None:
                _script = redis_client().register_script(_SCRIPT)
            args: list[float] = [hold]
            for endpoint, count in zip(endpoints, counts, strict=True):
                args += [interval(limits[endpoint]), count]
            return [float(x) for x in _script(keys=[KEY.format(e) for e in endpoints], args=args)]
        except (redis.RedisError, OSError):
            logger.warning("rate limits unavailable (Redis); letting attempts through")
            return [0.0] * sum(counts)
    out = []
    with _local_lock:
        now = time.time()
        for endpoint, count in zip(endpoints, counts, strict=True):
            tat = max(now, _local_tat.get(endpoint, 0.0))
            for _ in range(count):
                if tat - now <= hold:
                    out.append(tat - now)
                    tat += interval(limits[endpoint])
                else:
                    out.append(-(tat - now))
            _local_tat[endpoint] = tat
    return out
