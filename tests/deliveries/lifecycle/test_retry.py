"""The retry policy: which results are retried, and when the next attempt is due."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.durations import parse_duration, parse_schedule
from deliveries.lifecycle.retry import (
    DEFAULT_JITTER,
    DEFAULT_SCHEDULE,
    Classification,
    Outcome,
    classify,
    max_attempts,
    next_delay,
    parse_retry_after,
)
from deliveries.results import ErrorKind

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

schedules = st.lists(st.floats(min_value=0, max_value=7 * 86400), min_size=1, max_size=12)
jitters = st.floats(min_value=0, max_value=1)
seeds = st.integers(min_value=0, max_value=2**32)
retry_afters = st.floats(min_value=0, max_value=30 * 86400)


def close_enough(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# --- classify --------------------------------------------------------------------


@pytest.mark.parametrize("code", [200, 201, 202, 204, 299])
def test_any_2xx_is_success(code: int) -> None:
    assert classify(status_code=code, error_kind=None) == Classification(
        Outcome.SUCCESS, False, f"HTTP {code}"
    )


@pytest.mark.parametrize("code", [408, 409, 425, 429, 500, 502, 503, 504, 599])
def test_throttling_conflicts_and_server_errors_are_retried(code: int) -> None:
    assert classify(status_code=code, error_kind=None) == Classification(
        Outcome.RETRYABLE, False, f"HTTP {code}"
    )


@pytest.mark.parametrize(
    "code", [300, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 413, 422, 451, 499]
)
def test_redirects_and_other_client_errors_are_dead_at_once(code: int) -> None:
    assert classify(status_code=code, error_kind=None) == Classification(
        Outcome.FATAL, False, f"HTTP {code} (not retryable)"
    )


def test_410_gone_is_fatal_and_deactivates_the_endpoint() -> None:
    assert classify(status_code=410, error_kind=None) == Classification(
        Outcome.FATAL, True, "HTTP 410 (endpoint gone)"
    )


@pytest.mark.parametrize("code", [0, 99, 600, 999, -1])
def test_a_status_outside_http_is_fatal(code: int) -> None:
    result = classify(status_code=code, error_kind=None)
    assert result.outcome == Outcome.FATAL
    assert result.reason == f"HTTP {code} (invalid status)"


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (ErrorKind.TIMEOUT, "timeout"),
        (ErrorKind.CONNECTION, "connection error: Connection refused"),
        (ErrorKind.TLS, "TLS error: certificate verify failed"),
        (ErrorKind.WORKER_LOST, "worker lost"),
    ],
)
def test_transport_errors_are_retried_with_the_error_as_reason(kind, error: str) -> None:
    assert classify(status_code=None, error_kind=kind, error=error) == Classification(
        Outcome.RETRYABLE, False, error
    )


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (ErrorKind.BLOCKED, "blocked: example.com resolves to a private address"),
        (ErrorKind.INVALID_URL, "invalid URL: Not supported URL scheme ftp"),
        (ErrorKind.INTERNAL, "internal error: KeyError"),
    ],
)
def test_refused_impossible_or_buggy_requests_are_not_retried(kind, error: str) -> None:
    assert classify(status_code=None, error_kind=kind, error=error).outcome == Outcome.FATAL


def test_a_status_decides_even_when_an_error_is_also_given() -> None:
    assert classify(status_code=200, error_kind=ErrorKind.TIMEOUT).outcome == Outcome.SUCCESS


def test_a_result_with_neither_status_nor_error_is_a_bug() -> None:
    with pytest.raises(ValueError):
        classify(status_code=None, error_kind=None)


def test_outcomes_are_the_metric_label_strings() -> None:
    assert [o.value for o in Outcome] == ["success", "retryable", "fatal"]
    assert f"{Outcome.RETRYABLE}" == "retryable"


@given(st.integers(min_value=100, max_value=599))
def test_classify_gives_every_http_status_an_outcome(code: int) -> None:
    result = classify(status_code=code, error_kind=None)
    assert result.outcome in set(Outcome)
    assert (result.outcome == Outcome.SUCCESS) == (200 <= code <= 299)
    assert result.deactivate_endpoint == (code == 410)
    assert result.reason.startswith(f"HTTP {code}")


@given(st.integers())
def test_classify_never_raises_on_any_integer(code: int) -> None:
    assert classify(status_code=code, error_kind=None).deactivate_endpoint == (code == 410)


# --- schedule --------------------------------------------------------------------


def test_the_default_schedule_makes_9_attempts_over_about_35_hours() -> None:
    schedule = parse_schedule(DEFAULT_SCHEDULE)
    assert schedule == (1, 5, 30, 300, 1800, 7200, 28800, 86400)
    assert max_attempts(schedule) == 9
    assert sum(schedule) / 3600 == pytest.approx(34.59, abs=0.01)
    rng = random.Random(7)
    delays = [
        next_delay(
            attempt_number=n, schedule=schedule, jitter=DEFAULT_JITTER, retry_after=None, rng=rng
        )
        for n in range(1, 10)
    ]
    assert delays[-1] is None  # attempt 9 failed: dead
    assert all(d is not None for d in delays[:-1])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1s,5s,30s", (1.0, 5.0, 30.0)),
        ("250ms, 2 , 1.5m,1h,1d", (0.25, 2.0, 90.0, 3600.0, 86400.0)),
        ("0s", (0.0,)),
        (" 5M ", (300.0,)),
    ],
)
def test_it_parses_schedules(text: str, expected: tuple[float, ...]) -> None:
    assert parse_schedule(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ("1s,,5s", "step 2 is empty"),
        ("1s,", "step 2 is empty"),
        ("1s,-5s", "step 2: duration '-5s' is negative"),
        ("1s,5w", "unknown unit 'w'"),
        ("soon", "not a number"),
        ("inf", "not a number"),
    ],
)
def test_bad_schedules_are_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_schedule(text)


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**6),
            st.sampled_from(["", "ms", "s", "m", "h", "d"]),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_parse_schedule_reads_back_what_was_written(steps: list[tuple[int, str]]) -> None:
    factor = {"": 1, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    text = ",".join(f"{n}{unit}" for n, unit in steps)
    assert parse_schedule(text) == tuple(n * factor[unit] for n, unit in steps)


def test_parse_duration_reads_one_value() -> None:
    assert parse_duration("24h") == 86400.0


@pytest.mark.parametrize("text", ["99999999999999999999d", "9" * 400, "1000001d"])
def test_parse_duration_refuses_what_datetimes_cannot_hold(text: str) -> None:
    # timedelta(seconds=...) of these raised OverflowError: a 500 from the API.
    with pytest.raises(ValueError, match="too long"):
        parse_duration(text)
    assert parse_duration("1000000d") == 1_000_000 * 86400


# --- Retry-After -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("-5", 0.0),
        ("Wed, 01 May 2024 12:01:30 GMT", 90.0),
        ("Wed, 01 May 2024 11:00:00 GMT", 0.0),  # in the past: now
        (None, None),
        ("", None),
        ("soon", None),
        ("12 parsecs", None),
        ("Wed, 21 Oct 99999999999 07:28:00 GMT", None),  # OverflowError in the stdlib
        ("9" * 400, None),  # infinite
    ],
)
def test_it_reads_retry_after_seconds_and_dates(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_retry_after_http_dates_give_the_seconds_until_then(offset: int) -> None:
    header = format_datetime(NOW + timedelta(seconds=offset), usegmt=True)
    assert parse_retry_after(header, now=NOW) == max(0, offset)


@given(st.text())
def test_parse_retry_after_never_raises(value: str) -> None:
    result = parse_retry_after(value, now=NOW)
    assert result is None or result >= 0


# --- next_delay ------------------------------------------------------------------


def test_delays_follow_the_schedule_without_jitter() -> None:
    schedule = (1.0, 5.0, 30.0)
    delays = [
        next_delay(
            attempt_number=n, schedule=schedule, jitter=0, retry_after=None, rng=random.Random(1)
        )
        for n in (1, 2, 3, 4)
    ]
    assert delays == [1.0, 5.0, 30.0, None]


def test_retry_after_lengthens_the_wait_up_to_the_largest_step() -> None:
    kwargs: dict[str, Any] = {"schedule": (1.0, 5.0, 30.0), "jitter": 0.0, "rng": random.Random(1)}
    assert next_delay(attempt_number=1, retry_after=10, **kwargs) == 10
    assert next_delay(attempt_number=1, retry_after=3600, **kwargs) == 30  # capped
    assert next_delay(attempt_number=2, retry_after=1, **kwargs) == 5  # never shorter
    assert next_delay(attempt_number=4, retry_after=10, **kwargs) is None  # out of attempts


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        next_delay(
            attempt_number=0, schedule=(1.0,), jitter=0, retry_after=None, rng=random.Random()
        )
    with pytest.raises(ValueError, match="jitter"):
        next_delay(
            attempt_number=1, schedule=(1.0,), jitter=1.5, retry_after=None, rng=random.Random()
        )


@given(schedules, jitters, seeds, st.data())
def test_jittered_delay_stays_within_its_band(
    schedule: list[float], jitter: float, seed: int, data: st.DataObject
) -> None:
    n = data.draw(st.integers(min_value=1, max_value=len(schedule)))
    delay = next_delay(
        attempt_number=n,
        schedule=schedule,
        jitter=jitter,
        retry_after=None,
        rng=random.Random(seed),
    )
    step = schedule[n - 1]
    assert delay is not None
    assert step * (1 - jitter) - 1e-9 <= delay <= step * (1 + jitter) + 1e-9
    assert delay >= 0


@given(schedules, jitters, seeds, retry_afters, st.data())
def test_retry_after_wins_when_longer_but_is_capped(
    schedule: list[float], jitter: float, seed: int, retry_after: float, data: st.DataObject
) -> None:
    n = data.draw(st.integers(min_value=1, max_value=len(schedule)))
    common: dict[str, Any] = {"attempt_number": n, "schedule": schedule, "jitter": jitter}
    plain = next_delay(**common, retry_after=None, rng=random.Random(seed))
    delay = next_delay(**common, retry_after=retry_after, rng=random.Random(seed))
    assert plain is not None and delay is not None
    capped = min(retry_after, max(schedule))
    assert delay >= plain  # Retry-After never makes Homing retry sooner
    assert delay >= capped
    if capped >= plain:
        assert close_enough(delay, capped)
    else:
        assert delay == plain


@given(
    schedules,
    jitters,
    seeds,
    st.one_of(st.none(), retry_afters),
    st.integers(min_value=1, max_value=50),
)
def test_there_is_no_next_attempt_exactly_after_the_last_step(
    schedule: list[float], jitter: float, seed: int, retry_after: float | None, n: int
) -> None:
    delay = next_delay(
        attempt_number=n,
        schedule=schedule,
        jitter=jitter,
        retry_after=retry_after,
        rng=random.Random(seed),
    )
    assert (delay is None) == (n > len(schedule))
