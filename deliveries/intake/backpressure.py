"""Backpressure at intake (CONTRACT section 2): a tenant over its event rate or with too
deep a backlog gets 429 before anything is written, and other tenants never notice.

Event rate: a sliding window of one second, exact. Each admitted request is one entry
(its time and its number of events) in a window per tenant, and a request is admitted
while the events of the last second plus its own stay within the rate. A GCRA or token
bucket keeps one number instead, but cannot hold a strict window for requests that are
answered at once rather than spaced out: after a pause it lets a full burst through and
then keeps admitting at the rate, up to 2x the rate in one second (the bug
deliveries/worker/rate_limits.py already fixed for endpoints, whose attempts can be delayed).
The window holds one entry per admitted request of the last second and keeps a running
sum, so a check costs the same whatever the rate. With Redis the window is shared by
every web process (one Lua script, one round trip, Redis's clock); without Redis it is
this process's. When Redis does not answer, each process falls back to its own window
for REDIS_RETRY_SECONDS: events are still accepted (the web keeps working during a Redis
outage), within the rate per process rather than across them.

Backlog: unfinished (pending + delivering) deliveries, counted by a bounded query
(deliveries/intake/backlog.py, never past the limit) per tenant and process, at most
once per BACKLOG_FRESH_SECONDS, and less often when the count is slow: it walks one
index entry per unfinished delivery (measured: 140 ms for 200,000), so after a count
that took d seconds the figure is kept for d / BACKLOG_COUNT_SHARE seconds, which holds
the counting to that share of the time whatever the backlog. Between two counts the
figure grows by the deliveries this process creates. So the limit is approximate: a deep
backlog may run over it by what the other processes accept before this one counts
again, and a tenant that has just drained below it may be refused until then.
"""

from __future__ import annotations

import collections
import itertools
import logging
import math
import secrets
import threading
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from core.exceptions import Throttled
from core.redis import redis_client
from deliveries.intake.backlog import tenant_unfinished_count
from webhooks.models import Tenant

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 1.0  # "events per second", over any one-second window
# How long a backlog figure is used before the tenant's deliveries are counted again:
# at least this long, and long enough that counting takes at most BACKLOG_COUNT_SHARE of
# a web process's time for a tenant (a count of a million takes about 0.7 s).
BACKLOG_FRESH_SECONDS = 1.0
BACKLOG_COUNT_SHARE = 0.05
# Room in a full backlog opens as soon as one delivery finishes, and the figure is
# counted again every second: asking again after a second is not wasted.
BACKLOG_RETRY_AFTER = 1
# After Redis failed to answer, this process uses its own window this long before it
# asks Redis again (so an outage does not cost every request a timeout).
REDIS_RETRY_SECONDS = 5.0

RATE_LIMITED = "rate_limited"
BACKLOG_FULL = "backlog_full"


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """A tenant's effective limits: its own override, else the setting."""

    event_rate: int | None  # events per second; None: no limit
    max_backlog: int  # unfinished deliveries


def tenant_limits_effective(*, tenant: Tenant) -> TenantLimits:
    if tenant.event_rate is None:
        event_rate = settings.HOMING_TENANT_EVENT_RATE
    else:
        event_rate = tenant.event_rate or None  # 0: unlimited for this tenant
    max_backlog = tenant.max_backlog or settings.HOMING_TENANT_MAX_BACKLOG
    return TenantLimits(event_rate=event_rate, max_backlog=max_backlog)


def tenant_limits_set(
    *, tenant: Tenant, event_rate: int | None, max_backlog: int | None, dry_run: bool = False
) -> TenantLimits:
    """Store a tenant's overrides (None: follow the setting; event_rate 0: no rate limit)
    and return its effective limits. Web processes see them within the API-key cache's
    few seconds (webhooks/services/tenants.py)."""
    tenant.event_rate, tenant.max_backlog = event_rate, max_backlog
    if not dry_run:
        Tenant.objects.filter(pk=tenant.pk).update(event_rate=event_rate, max_backlog=max_backlog)
    return tenant_limits_effective(tenant=tenant)


def intake_admit(*, tenant: Tenant, events: int) -> None:
    """Admit a request of `events` events, or raise Throttled (nothing recorded then).

    The backlog is looked at first: it changes nothing, while an admitted rate check
    has taken its place in the window.
    """
    limits = tenant_limits_effective(tenant=tenant)
    if _backlog_figure(tenant.pk, limits.max_backlog) >= limits.max_backlog:
        raise Throttled(
            f"This tenant has {limits.max_backlog} or more unfinished deliveries, its "
            "limit; send the events again once some have been delivered.",
            code=BACKLOG_FULL,
            retry_after=BACKLOG_RETRY_AFTER,
        )
    if limits.event_rate is None:
        return
    if events > limits.event_rate:
        raise Throttled(
            f"A batch of {events} events is more than this tenant's event rate of "
            f"{limits.event_rate} per second allows; send smaller batches.",
            code=RATE_LIMITED,
            retry_after=math.ceil(WINDOW_SECONDS),
        )
    wait = _rate_take(tenant.pk, rate=limits.event_rate, events=events)
    if wait > 0:
        raise Throttled(
            f"This tenant is over its event rate of {limits.event_rate} per second; "
            "send the events again after Retry-After seconds.",
            code=RATE_LIMITED,
            retry_after=max(1, math.ceil(wait)),
        )


def work_admit(*, tenant_id: str) -> None:
    """Admit a request that makes a delivery unfinished outside POST /events: a test
    event, a retry, a dead-letter replay, the start of a bulk replay or a recover. Each
    counts like one event (CONTRACT section 2), so a consumer cannot fill the tenant's
    backlog through them and lock the tenant's own events out. Raises Throttled (nothing
    recorded then); the caller reports what it created with `intake_admitted`."""
    intake_admit(tenant=Tenant.objects.get(pk=tenant_id), events=1)


def backlog_room(*, tenant: Tenant) -> int:
    """How many more unfinished deliveries the tenant may have now (0: its backlog is
    full). A background replay job takes no more than this per batch and pauses at 0; it
    takes no place in the event-rate window, which limits requests, not their work."""
    most = tenant_limits_effective(tenant=tenant).max_backlog
    return max(0, most - _backlog_figure(tenant.pk, most))


def intake_admitted(*, tenant: Tenant, deliveries: int) -> None:
    """Count the deliveries an admitted request created into this process's figure."""
    work_admitted(tenant_id=tenant.pk, deliveries=deliveries)


def work_admitted(*, tenant_id: str, deliveries: int) -> None:
    """As intake_admitted, for work admitted by `work_admit` or a job's `backlog_room`."""
    with _backlog_lock:
        entry = _backlog.get(tenant_id)
        if entry is not None:
            _backlog[tenant_id] = (entry[0], entry[1] + deliveries)


# --- the backlog figure --------------------------------------------------------------

_backlog: dict[str, tuple[float, int]] = {}  # tenant id -> (used until, figure)
_backlog_lock = threading.Lock()


def _backlog_figure(tenant_id: str, most: int) -> int:
    entry = _backlog.get(tenant_id)
    if entry is not None and time.monotonic() < entry[0]:
        return entry[1]
    started = time.monotonic()
    figure = tenant_unfinished_count(tenant_id=tenant_id, most=most)
    counted = time.monotonic()
    fresh_for = max(BACKLOG_FRESH_SECONDS, (counted - started) / BACKLOG_COUNT_SHARE)
    with _backlog_lock:
        _backlog[tenant_id] = (counted + fresh_for, figure)
    return figure


def backlog_forget() -> None:
    """Drop every cached figure (tests; an operator's change is seen within a second)."""
    with _backlog_lock:
        _backlog.clear()


# --- the event-rate window -----------------------------------------------------------

# KEYS: the tenant's window (a sorted set of "<request>:<events>" scored by time) and the
# sum of its events. ARGV: rate, events, a unique request id. Entries older than a
# second leave the window first. Returns "0" when the request is admitted (and entered),
# else the seconds until enough entries leave for it to fit, as text.
_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local rate = tonumber(ARGV[1])
local events = tonumber(ARGV[2])
local held = tonumber(redis.call('GET', KEYS[2]) or '0')
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 1)
for _, entry in ipairs(gone) do
  held = held - tonumber(string.match(entry, ':(%d+)$'))
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1) end
if held < 0 then held = 0 end
local answer = '0'
if held + events > rate then
  local need = held + events - rate
  local oldest = redis.call('ZRANGE', KEYS[1], 0, need - 1, 'WITHSCORES')
  local freed, leaves = 0, now
  for i = 1, #oldest, 2 do
    freed = freed + tonumber(string.match(oldest[i], ':(%d+)$'))
    leaves = tonumber(oldest[i + 1]) + 1
    if freed >= need then break end
  end
  answer = string.format('%.6f', math.max(leaves - now, 0.000001))
else
  redis.call('ZADD', KEYS[1], now, ARGV[3] .. ':' .. events)
  held = held + events
end
redis.call('SET', KEYS[2], held, 'PX', 2000)
redis.call('PEXPIRE', KEYS[1], 2000)
return answer
"""
# {tenant} is a hash tag: both keys of a tenant land on one Redis Cluster slot.
WINDOW_KEY = "homing:tenant-rate:{{{}}}:window"
HELD_KEY = "homing:tenant-rate:{{{}}}:held"

_request_ids = itertools.count()
_process_id = secrets.token_hex(4)  # request ids stay unique across processes and machines
_script: redis.commands.core.Script | None = None
_redis_down_until = 0.0


def _rate_take(tenant_id: str, *, rate: int, events: int) -> float:
    """0 when the request fits the window (and is entered in it); else seconds to wait."""
    global _script, _redis_down_until
    if settings.REDIS_URL and time.monotonic() >= _redis_down_until:
        try:
            if _script is None:
                _script = redis_client().register_script(_SCRIPT)
            request = f"{_process_id}.{next(_request_ids)}"
            keys = [WINDOW_KEY.format(tenant_id), HELD_KEY.format(tenant_id)]
            return float(_script(keys=keys, args=[rate, events, request]))
        except (redis.RedisError, OSError):
            _redis_down_until = time.monotonic() + REDIS_RETRY_SECONDS
            logger.warning(
                "tenant event rates unavailable (Redis); this process limits on its own for %.0f s",
                REDIS_RETRY_SECONDS,
            )
    return _local_take(tenant_id, rate=rate, events=events)


class _Window:
    __slots__ = ("entries", "held")

    def __init__(self) -> None:
        self.entries: collections.deque[tuple[float, int]] = collections.deque()
        self.held = 0


_windows: collections.defaultdict[str, _Window] = collections.defaultdict(_Window)
_windows_lock = threading.Lock()


def _local_take(tenant_id: str, *, rate: int, events: int) -> float:
    """The script's rule on this process's own window."""
    with _windows_lock:
        now = time.monotonic()
        window = _windows[tenant_id]
        while window.entries and window.entries[0][0] <= now - WINDOW_SECONDS:
            window.held -= window.entries.popleft()[1]
        if window.held + events <= rate:
            window.entries.append((now, events))
            window.held += events
            return 0.0
        need, freed = window.held + events - rate, 0
        for moment, count in window.entries:
            freed += count
            if freed >= need:
                return max(moment + WINDOW_SECONDS - now, 1e-6)
        return WINDOW_SECONDS  # unreachable while events <= rate


def rate_forget() -> None:
    """Empty this process's windows and ask Redis (the current client) again (tests)."""
    global _redis_down_until, _script
    with _windows_lock:
        _windows.clear()
    _redis_down_until, _script = 0.0, None
