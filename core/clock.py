"""The database server's clock, read from any process.

Due times, leases, probe times, retention and `webhook-timestamp` are compared by, or
with, the database: one machine whose own clock is off must not make receivers refuse
its webhooks, nor make anything due early, late or twice. A query per `now` would cost
a round trip, so each process measures how far its clock is from the database's (the
middle of the quickest of a few `SELECT clock_timestamp()` round trips) at most every
REFRESH_SECONDS, and adds that offset to its own clock. Without PostgreSQL (the embedded
single-machine set-up) the offset is 0.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from django.db import DatabaseError, connection, transaction

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 10.0
SAMPLES = 3  # round trips per measurement; the quickest one counts
# An offset this large is worth an operator's attention: that machine needs NTP.
WARN_OFFSET_SECONDS = 2.0

_lock = threading.Lock()
_offset = 0.0
_measured_at: float | None = None  # time.monotonic() of the last measurement


def database_offset() -> float:
    """Seconds to add to this process's clock to read the database's."""
    global _offset, _measured_at
    if _measured_at is not None and time.monotonic() - _measured_at < REFRESH_SECONDS:
        return _offset
    if connection.vendor != "postgresql":
        return 0.0
    with _lock:
        if _measured_at is not None and time.monotonic() - _measured_at < REFRESH_SECONDS:
            return _offset
        measured = _measure()
        _measured_at = time.monotonic()
        if measured is not None:
            if abs(measured) >= WARN_OFFSET_SECONDS and abs(measured - _offset) >= 1:
                logger.warning(
                    "this machine's clock is %.1f s off the database's: "
                    "times follow the database's",
                    -measured,
                )
            _offset = measured
        return _offset


def database_time(*, measure: bool = True) -> float:
    """The database's clock as Unix seconds (what `time.time()` would say there).
    `measure=False`: with the offset last measured, never a query (an event loop)."""
    return time.time() + (database_offset() if measure else _offset)


def database_now() -> datetime:
    """The database's clock as an aware datetime (what `timezone.now()` would say there)."""
    return datetime.fromtimestamp(database_time(), tz=UTC)


def _measure() -> float | None:
    """The offset from the quickest of SAMPLES round trips: the server read its clock
    somewhere inside the round trip, so its middle is off by at most half of it, and on a
    loaded machine one round trip can take tens of milliseconds (a new delivery then came
    out due that much in the future, and a claim at once did not find it)."""
    best: tuple[float, float] | None = None  # (round trip, offset)
    try:
        # A savepoint inside a caller's transaction: a failed read leaves it usable.
        with transaction.atomic(), connection.cursor() as cursor:
            for _ in range(SAMPLES):
                before = time.time()
                cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
                after = time.time()
                (server,) = cursor.fetchone()
                sample = (after - before, float(server) - (before + after) / 2)
                best = sample if best is None or sample[0] < best[0] else best
    except DatabaseError:
        logger.warning("could not read the database's clock; keeping the last offset")
        return None
    assert best is not None
    return best[1]
