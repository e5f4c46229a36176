"""What the soak (bench/steps_soak.py) watches from outside: the history tables' size and
rows every few seconds, the scheduler's drops (its log), lock waits (PostgreSQL's log
with `log_lock_waits`), and ingestion's requests, each with its wall-clock start."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

HISTORY = ("webhooks_event", "deliveries_delivery", "deliveries_attempt")
# Waits shorter than this are not logged by PostgreSQL (it is deadlock_timeout).
LOCK_WAIT_LOGGED_FROM_MS = 10


@dataclass
class Sample:
    at: float  # time.time()
    bytes_total: int
    rows: dict[str, int]  # table -> live rows (pg_stat n_live_tup over its partitions)
    partitions: dict[str, int]  # partition -> live rows
    received: int  # webhooks at the receiver so far


@dataclass
class Drop:
    end: float  # time.time() of the scheduler's log line
    ms: float
    span: str
    partitions: list[str]
    rows: int = 0  # live rows of those partitions at the last sample before the drop
    locked_ms: float | None = None  # a drop's "history locked for N ms", a create's DEFAULT's


@dataclass
class LockWait:
    at: float
    mode: str
    relation: str
    ms: float


@dataclass
class Request:
    started: float  # time.time()
    seconds: float
    status: int
    events: int  # accepted


@dataclass
class Watch:
    samples: list[Sample] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)  # batches
    probes: list[Request] = field(default_factory=list)  # single POSTs
    lock: threading.Lock = field(default_factory=threading.Lock)


SIZE_SQL = """
SELECT parent.relname, child.relname, coalesce(pg_total_relation_size(child.oid), 0),
    coalesce(s.n_live_tup, 0)
FROM pg_inherits i
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_class child ON child.oid = i.inhrelid
LEFT JOIN pg_stat_user_tables s ON s.relid = child.oid
WHERE parent.relname = ANY(%s)
"""


def sample(dsn: str, received: Callable[[], int]) -> Sample | None:
    """One look at the history tables; None when a drop got in the way (next time)."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(SIZE_SQL, [list(HISTORY)]).fetchall()
    except psycopg.Error:
        return None
    per_table = dict.fromkeys(HISTORY, 0)
    for table, _, _, live in rows:
        per_table[table] += live
    return Sample(
        at=time.time(),
        bytes_total=sum(size for _, _, size, _ in rows),
        rows=per_table,
        partitions={name: live for _, name, _, live in rows},
        received=received(),
    )


def lock_waits_on(dsn: str) -> None:
    """Have PostgreSQL log every lock wait from LOCK_WAIT_LOGGED_FROM_MS on."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_lock_waits = on")
        conn.execute(f"ALTER SYSTEM SET deadlock_timeout = '{LOCK_WAIT_LOGGED_FROM_MS}ms'")
        conn.execute("SELECT pg_reload_conf()")


def relation_names(dsn: str) -> dict[str, str]:
    """oid -> name of every table and index now (partitions dropped later stay known)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return {str(oid): name for oid, name in conn.execute("SELECT oid, relname FROM pg_class")}


# 2026-11-28 03:10:00.123 UTC [1234] LOG:  process 1234 acquired AccessExclusiveLock on
# relation 16390 of database 16384 after 35.123 ms
_ACQUIRED = re.compile(
    r"^(\S+ \S+) \S+ \[\d+\] LOG:\s+process \d+ acquired (\w+) on relation (\d+) of database"
    r" \d+ after ([\d.]+) ms"
)
_TIMED_OUT = re.compile(r"canceling statement due to lock timeout")


def lock_waits(log: Path, *, since: float, names: dict[str, str]) -> tuple[list[LockWait], int]:
    """The lock waits PostgreSQL logged since `since`, and how many waits gave up."""
    waits, timeouts = [], 0
    for line in log.read_text(errors="replace").splitlines():
        if match := _ACQUIRED.match(line):
            at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            if at >= since:
                relation = names.get(match.group(3), match.group(3))
                waits.append(LockWait(at, match.group(2), relation, float(match.group(4))))
        elif _TIMED_OUT.search(line):
            timeouts += 1
    return waits, timeouts


# 2026-11-28 03:10:00,123 INFO dlq.services.retention retention: dropped 2026-11-28 03:02
# .. 2026-11-28 03:03 (deliveries_attempt_p..., ...) in 42 ms: about 123 rows
_DROPPED = re.compile(r"^(\S+ \S+) INFO \S+ retention: dropped (.+?) \(([^)]*)\) in (\d+) ms")
_KEPT = re.compile(r"^(\S+ \S+) INFO \S+ retention: kept (.+)$")
# ... partitions: created 2026-11-28 03:12 .. 2026-11-28 03:13 (webhooks_event_p...) in 9 ms
_CREATED = re.compile(r"^(\S+ \S+) INFO \S+ partitions: created (.+?) \(([^)]*)\) in (\d+) ms")
_SKIPPED = re.compile(r"^(\S+ \S+) INFO \S+ partitions: skipped (.+)$")


def drops(log: Path) -> tuple[list[Drop], list[str]]:
    """The scheduler's drops, and what it kept (with why), from its log."""
    return _outcomes(log, _DROPPED, _KEPT)


def creates(log: Path) -> tuple[list[Drop], list[str]]:
    """The scheduler's partition creations (one table's partition each), and what it
    skipped (with why), from its log."""
    return _outcomes(log, _CREATED, _SKIPPED)


# ... in 630 ms: about 4999998 rows, history locked for 5 ms
# ... in 12 ms: webhooks_event_default locked for 3 ms
_LOCKED = re.compile(r" locked for (\d+) ms")


def _outcomes(
    log: Path, done: re.Pattern[str], not_done: re.Pattern[str]
) -> tuple[list[Drop], list[str]]:
    found, other = [], []
    for line in log.read_text(errors="replace").splitlines():
        if match := done.match(line):
            end = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            names = [n.strip() for n in match.group(3).split(",")]
            locked = _LOCKED.search(line)
            found.append(
                Drop(
                    end,
                    float(match.group(4)),
                    match.group(2),
                    names,
                    locked_ms=float(locked.group(1)) if locked else None,
                )
            )
        elif match := not_done.match(line):
            other.append(f"{match.group(1)} {match.group(2)[:200]}")
    return found, other


def rows_dropped(drop: Drop, samples: list[Sample]) -> int:
    """Live rows of the drop's partitions at the last sample that still had them."""
    for s in reversed(samples):
        if s.at <= drop.end and any(name in s.partitions for name in drop.partitions):
            return sum(s.partitions.get(name, 0) for name in drop.partitions)
    return 0


def during(request: Request, windows: list[tuple[float, float]]) -> bool:
    """Whether the request was under way at some moment of a window."""
    end = request.started + request.seconds
    return any(request.started < w_end and end > w_start for w_start, w_end in windows)
