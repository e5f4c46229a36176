"""The retry policy (CONTRACT.md section 4), pure: callers pass in every value.

`classify` says what an attempt's result means, `next_delay` when the next attempt is
due. No Django here, so the policy is property-tested in isolation and every caller
(worker, scheduler, API) shares one definition.
"""

from __future__ import annotations

import email.utils
import enum
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from deliveries.results import ErrorKind

DEFAULT_SCHEDULE = "1s,5s,30s,5m,30m,2h,8h,24h"
DEFAULT_JITTER = 0.2


class Outcome(enum.StrEnum):
    SUCCESS = "success"
    RETRYABLE = "retryable"
    FATAL = "fatal"


@dataclass(frozen=True)
class Classification:
    outcome: Outcome
    deactivate_endpoint: bool
    reason: str


# The contract's retryable 4xx: timeout, conflict, too early, too many requests.
RETRYABLE_4XX = frozenset({408, 409, 425, 429})


# Transport errors that repeating cannot fix; every other one is retryable. "blocked"
# means the host resolved to a private address at send time (DNS rebinding or a changed
# record): resending would only be refused again, and a dead letter can be replayed once
# the DNS is fixed. "internal" is a bug: retrying it nine times would only hide it.
FATAL_ERRORS = frozenset({ErrorKind.BLOCKED, ErrorKind.INVALID_URL, ErrorKind.INTERNAL})


def classify(
    *, status_code: int | None, error_kind: ErrorKind | None, error: str = ""
) -> Classification:
    """What an attempt's result means; `error` is the human-readable text (the reason).

    A status code, when there is one, decides: the receiver answered. Otherwise the
    kind of transport error does.
    """
    if status_code is not None:
        return _classify_status(status_code)
    if error_kind is None:
        raise ValueError("an attempt has either a status code or an error kind")
    reason = error or error_kind.value
    if error_kind in FATAL_ERRORS:
        return Classification(Outcome.FATAL, False, reason)
    return Classification(Outcome.RETRYABLE, False, reason)


def _classify_status(code: int) -> Classification:
    if 200 <= code <= 299:
        return Classification(Outcome.SUCCESS, False, f"HTTP {code}")
    if code in RETRYABLE_4XX or 500 <= code <= 599:
        return Classification(Outcome.RETRYABLE, False, f"HTTP {code}")
    if code == 410:
        # Gone: the receiver says the endpoint will never come back.
        return Classification(Outcome.FATAL, True, "HTTP 410 (endpoint gone)")
    if not 100 <= code <= 599:
        # Not HTTP; a broken receiver will not mend by itself within the schedule.
        return Classification(Outcome.FATAL, False, f"HTTP {code} (invalid status)")
    # 1xx as a final answer, 3xx (redirects are not followed) and every other 4xx.
    return Classification(Outcome.FATAL, False, f"HTTP {code} (not retryable)")


def max_attempts(schedule: Sequence[float]) -> int:
    """One first attempt plus one retry per step: the default schedule gives 9."""
    return len(schedule) + 1


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or an HTTP-date).

    A time in the past or a negative number means "now" (0); anything unparsable is
    ignored (None) rather than trusted.
    """
    if value is None:
        return None
    text = value.strip()
    if re.fullmatch(r"[+-]?[0-9]+(?:\.[0-9]+)?", text):
        seconds = float(text)  # huge digit strings become inf, never an error
        return None if math.isinf(seconds) else max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        # OverflowError: a year like 99999999999 that no datetime can hold.
        return None
    if when is None:  # older Pythons returned None instead of raising
        return None
    # "-0000" dates come back naive; HTTP-dates are always GMT.
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    try:
        return max(0.0, (when - now).total_seconds())
    except OverflowError:  # a date at the edge of the calendar, minus now
        return None


def next_delay(
    *,
    attempt_number: int,
    schedule: Sequence[float],
    jitter: float,
    retry_after: float | None,
    rng: random.Random,
) -> float | None:
    """Seconds from failed attempt `attempt_number` (1-based) to the next; None = give up.

    The step is jittered so that deliveries failing together do not retry in lockstep.
    A Retry-After lengthens the wait up to the schedule's largest step — a receiver
    cannot park a delivery for longer than Homing would wait anyway — and never
    shortens it below the jittered step.
    """
    if attempt_number < 1:
        raise ValueError(f"attempt_number starts at 1, got {attempt_number}")
    if not 0 <= jitter <= 1:
        raise ValueError(f"jitter must be between 0 and 1, got {jitter}")
    if attempt_number > len(schedule):
        return None
    delay = max(0.0, schedule[attempt_number - 1] * rng.uniform(1 - jitter, 1 + jitter))
    if retry_after is not None and not math.isnan(retry_after):
        delay = max(delay, min(max(0.0, retry_after), max(schedule)))
    return delay
