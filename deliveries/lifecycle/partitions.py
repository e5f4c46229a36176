"""History partitioned by time (PostgreSQL): events, deliveries and attempts live in one
partition per HOMING_PARTITION_INTERVAL, and retention drops whole partitions.

The partition key is the time-ordered id (core/ids.py): events and deliveries on their
own id (the primary key is then the partition key, and a lookup by id reads one
partition), attempts on their delivery's id (an attempt lives in its delivery's interval
however late the retry, and leaves with it). A bound is `id_floor(prefix, ms)`: every id
made from that millisecond on sorts at or after it.

Each table also has a DEFAULT partition: ids made before the current alphabet (they sort
after every new one), rows a replay puts back after their interval was dropped, and rows
of an interval nobody created in time. The retention purge deletes those row by row
(dlq/services/retention.py); it finds them as it finds any old row.

Locks (measured in bench/README.md): a partition is created standalone and ATTACHed: SHARE
UPDATE EXCLUSIVE on the table (inserts and reads go on) and ACCESS EXCLUSIVE on DEFAULT
for an instant, its scan spared by a constraint when DEFAULT holds rows. A drop takes
ACCESS EXCLUSIVE on the three tables (PostgreSQL's DETACH or DROP of a partition locks
its parent) for the milliseconds of a few index probes, one counter update and three
DETACHes, whatever the rows; the detached tables' files are removed after that, under
their own locks. Each waits at most LOCK_TIMEOUT for its locks: behind a long
transaction it gives up and the next run tries again.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.backends.utils import CursorWrapper

from core.clock import database_now
from core.ids import id_floor, id_millisecond
from deliveries.statuses import UNFINISHED

AHEAD = 2  # intervals created ahead of the current one
LOCK_TIMEOUT = "500ms"  # the longest a drop or a create waits for its locks
# A range this far ahead gets its DEFAULT exclusion constraint (see _default_excludes):
# no clock of ours is that far ahead of the database's.
FUTURE_MARGIN_MS = 30_000
DETACHED = "_detached"  # the suffix of a dropped interval's partitions until their files go


@dataclass(frozen=True)
class History:
    """One partitioned table: its name, the prefix of its key's ids, its key column."""

    table: str
    prefix: str
    key: str

    @property
    def default(self) -> str:
        return f"{self.table}_default"

    def bound(self, millisecond: int) -> str:
        return id_floor(self.prefix, millisecond)

    def name_at(self, millisecond: int) -> str:
        at = datetime.fromtimestamp(millisecond / 1000, tz=UTC)
        return f"{self.table}_p{at:%Y%m%d%H%M%S}" + (
            f"{at.microsecond // 1000:03d}" * (millisecond % 1000 != 0)
        )


EVENTS = History("webhooks_event", "evt", "id")
DELIVERIES = History("deliveries_delivery", "dlv", "id")
ATTEMPTS = History("deliveries_attempt", "dlv", "delivery_id")
# Drop order: children first (nothing references a partition at the database level, but
# a reader joining them never sees an attempt without its delivery).
HISTORY = (ATTEMPTS, DELIVERIES, EVENTS)
# Lock order: ingestion's (an ingest statement writes events, then deliveries).
LOCK_ORDER = (EVENTS, DELIVERIES, ATTEMPTS)


@dataclass(frozen=True)
class Partition:
    table: str
    name: str
    start_ms: int | None  # None: the default partition
    end_ms: int | None
    rows: int  # the planner's estimate (pg_class.reltuples); 0 before the first ANALYZE
    bytes: int  # with its indexes and TOAST

    @property
    def span(self) -> str:
        if self.start_ms is None or self.end_ms is None:
            return "default"
        return f"{_utc(self.start_ms)} .. {_utc(self.end_ms)}"


@dataclass
class PartitionStep:
    """What one maintenance step did (or, in a dry run, would do) and why."""

    action: str  # created, dropped, kept, skipped
    span: str
    partitions: list[str]
    detail: str = ""
    seconds: float = 0.0
    locked: float = 0.0  # seconds others waited on: the history tables (drop), DEFAULT (create)

    def __str__(self) -> str:
        took = f" in {self.seconds * 1000:.0f} ms" if self.seconds else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.action} {self.span} ({', '.join(self.partitions)}){took}{detail}"


def history_partitioned() -> bool:
    """Whether this database's history is partitioned (PostgreSQL after the migration)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_class WHERE relname = ANY(%s) AND relkind = 'p'"
            " AND pg_table_is_visible(oid)",
            [[h.table for h in HISTORY]],
        )
        return cursor.fetchone()[0] == len(HISTORY)


_BOUND = re.compile(r"FOR VALUES FROM \('([^']*)'\) TO \('([^']*)'\)")


def partitions_list() -> list[Partition]:
    """Every partition of the three tables, oldest first, the default last."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT parent.relname, child.relname, pg_get_expr(child.relpartbound, child.oid),
                greatest(child.reltuples, 0)::bigint, pg_total_relation_size(child.oid)
            FROM pg_inherits i
            JOIN pg_class parent ON parent.oid = i.inhparent
            JOIN pg_class child ON child.oid = i.inhrelid
            WHERE parent.relname = ANY(%s) AND pg_table_is_visible(parent.oid)
            """,
            [[h.table for h in HISTORY]],
        )
        rows = cursor.fetchall()
    found = []
    for table, name, bound, estimate, size in rows:
        match = _BOUND.match(bound)
        start = id_millisecond(match.group(1)) if match else None
        end = id_millisecond(match.group(2)) if match else None
        found.append(Partition(table, name, start, end, estimate, size))
    order = [h.table for h in HISTORY]
    return sorted(found, key=lambda p: (order.index(p.table), p.start_ms is None, p.start_ms or 0))


def interval_ms() -> int:
    return max(1, round(settings.HOMING_PARTITION_INTERVAL * 1000))


def partitions_ensure(
    *, now_ms: int | None = None, since_ms: int | None = None, dry_run: bool = False
) -> list[PartitionStep]:
    """Create the partitions of the current interval and the AHEAD next ones (from the
    interval of since_ms on, if given) where none covers them yet. An interval already
    partly covered (the interval setting changed) gets partitions for its gaps only;
    one whose rows are already in the default partition is left there (PostgreSQL
    would refuse the partition) and said so."""
    now = _now_ms() if now_ms is None else now_ms
    step = interval_ms()
    first = (since_ms if since_ms is not None else now) // step * step
    last = now // step * step + AHEAD * step
    existing = partitions_list()
    outcomes = []
    for start in range(first, last + 1, step):
        for history in LOCK_ORDER:
            taken = [
                (p.start_ms, p.end_ms)
                for p in existing
                if p.table == history.table and p.start_ms is not None and p.end_ms is not None
            ]
            for lo, hi in _gaps(start, start + step, taken):
                outcomes.append(_create(history, lo, hi, now_ms=now, dry_run=dry_run))
    return outcomes


def _gaps(lo: int, hi: int, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    gaps, at = [], lo
    for start, end in sorted(taken):
        if end <= at or start >= hi:
            continue
        if start > at:
            gaps.append((at, start))
        at = max(at, end)
    if at < hi:
        gaps.append((at, hi))
    return gaps


def _create(history: History, lo: int, hi: int, *, now_ms: int, dry_run: bool) -> PartitionStep:
    name, span = history.name_at(lo), f"{_utc(lo)} .. {_utc(hi)}"
    bounds = [history.bound(lo), history.bound(hi)]
    with connection.cursor() as cursor:
        cursor.execute(
            # Names are this module's constants, never input.
            f"SELECT 1 FROM {history.default} WHERE {history.key} >= %s"  # noqa: S608
            f" AND {history.key} < %s LIMIT 1",
            bounds,
        )
        if cursor.fetchone():
            return PartitionStep("skipped", span, [name], "its rows are in the default partition")
        cursor.execute(f"SELECT EXISTS (SELECT FROM {history.default})")  # noqa: S608
        default_holds_rows = cursor.fetchone()[0]
    if dry_run:
        return PartitionStep("created", span, [name], "dry run")
    started = time.monotonic()
    outside = f"{name}_outside"
    try:
        if default_holds_rows and lo >= now_ms + FUTURE_MARGIN_MS:
            _default_excludes(history, outside, bounds)
        else:
            # A constraint a failed run left on DEFAULT would refuse this interval's rows,
            # which go there until the partition exists.
            _default_constraint_dropped(history, outside)
        attaching = time.monotonic()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # as in _drop
            # The default partition's storage settings (autovacuum thresholds) carry over.
            cursor.execute(
                "SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class"
                " WHERE relname = %s AND pg_table_is_visible(oid)",
                [history.default],
            )
            options = cursor.fetchone()[0]
            cursor.execute(
                f"CREATE TABLE {name} (LIKE {history.table} INCLUDING DEFAULTS"
                f" INCLUDING CONSTRAINTS){f' WITH ({options})' if options else ''}"
            )
            # ACCESS EXCLUSIVE on DEFAULT until commit: PostgreSQL must know none of its
            # rows belongs here, by scanning it unless its constraints already say so.
            cursor.execute(
                f"ALTER TABLE {history.table} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)",
                bounds,
            )
            cursor.execute(f"ALTER TABLE {history.default} DROP CONSTRAINT IF EXISTS {outside}")
            partition_indexes_named(cursor, table=history.table, partition=name)
    except DatabaseError as exc:
        return PartitionStep("skipped", span, [name], f"not now, next run: {exc}".strip())
    locked = time.monotonic() - attaching
    detail = f"{history.default} locked for {locked * 1000:.0f} ms"
    return PartitionStep("created", span, [name], detail, time.monotonic() - started, locked)


def _default_excludes(history: History, constraint: str, bounds: list[str]) -> None:
    """A valid CHECK constraint on DEFAULT that keeps it out of the range `bounds`, so that
    the ATTACH need not scan DEFAULT (a converted installation's DEFAULT holds its old
    ids: millions of rows for a retention period). Added NOT VALID (an instant's ACCESS
    EXCLUSIVE), then validated under SHARE UPDATE EXCLUSIVE, which lets reads and writes
    go on while it scans. Only for a range starting a while from now: until the ATTACH,
    the constraint refuses that range's rows."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT convalidated FROM pg_constraint WHERE conname = %s AND conrelid = %s::regclass",
            [constraint, history.default],
        )
        found = cursor.fetchone()
    if found and found[0]:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # as in _drop
        if not found:
            cursor.execute(
                f"ALTER TABLE {history.default} ADD CONSTRAINT {constraint}"
                f" CHECK ({history.key} < %s OR {history.key} >= %s) NOT VALID",
                bounds,
            )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute(f"ALTER TABLE {history.default} VALIDATE CONSTRAINT {constraint}")


def _default_constraint_dropped(history: History, constraint: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_constraint WHERE conname = %s AND conrelid = %s::regclass",
            [constraint, history.default],
        )
        if cursor.fetchone() is None:
            return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute(f"ALTER TABLE {history.default} DROP CONSTRAINT {constraint}")


def partition_indexes_named(cursor: CursorWrapper, *, table: str, partition: str) -> None:
    """Name a partition's indexes after the table's (`delivery_endpoint_sequence_p2026…`)
    rather than PostgreSQL's column-made names: plans then say which index they use."""
    suffix = partition.removeprefix(table)
    cursor.execute(
        "SELECT child.relname, parent.relname FROM pg_index x"
        " JOIN pg_inherits i ON i.inhrelid = x.indexrelid"
        " JOIN pg_class child ON child.oid = x.indexrelid"
        " JOIN pg_class parent ON parent.oid = i.inhparent"
        " WHERE x.indrelid = %s::regclass",
        [partition],
    )
    for child, parent in cursor.fetchall():
        wanted = f"{parent[: 63 - len(suffix)]}{suffix}"
        if child != wanted:
            cursor.execute(f'ALTER INDEX "{child}" RENAME TO "{wanted}"')


def partitions_drop_expired(
    *, now_ms: int | None = None, dry_run: bool = False
) -> list[PartitionStep]:
    """Drop the intervals wholly older than HOMING_RETENTION, all three tables' partitions
    of one interval together, and raise each endpoint's `purged_through` to the highest
    sequence dropped, in the same short transaction. An interval that still holds an
    unfinished delivery (pending, delivering, held), or whose events an unfinished
    delivery of a later interval needs, is kept and said so."""
    if not dry_run:
        _detached_removed()  # what a killed run left
    now = _now_ms() if now_ms is None else now_ms
    cutoff = now - round(settings.HOMING_RETENTION * 1000)
    spans: dict[tuple[int, int], dict[str, Partition]] = {}
    for p in partitions_list():
        if p.start_ms is not None and p.end_ms is not None and p.end_ms <= cutoff:
            spans.setdefault((p.start_ms, p.end_ms), {})[p.table] = p
    return [_drop(lo, hi, found, dry_run=dry_run) for (lo, hi), found in sorted(spans.items())]


def _drop(lo: int, hi: int, found: dict[str, Partition], *, dry_run: bool) -> PartitionStep:
    names = [found[h.table].name for h in HISTORY if h.table in found]
    span = f"{_utc(lo)} .. {_utc(hi)}"
    rows = sum(p.rows for p in found.values())
    started = time.monotonic()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            if not dry_run:
                # From here on nobody reads or writes these tables until commit: the check
                # below cannot be overtaken by a replay or a retry.
                tables = ", ".join(h.table for h in LOCK_ORDER)
                cursor.execute(f"LOCK TABLE ONLY {tables} IN ACCESS EXCLUSIVE MODE")
            unfinished = _unfinished(cursor, lo, hi, found)
            if unfinished:
                return PartitionStep("kept", span, names, unfinished)
            if dry_run:
                return PartitionStep("dropped", span, names, f"dry run, about {rows} rows")
            if DELIVERIES.table in found:
                cursor.execute(_RAISE_PURGED_THROUGH.format(part=found[DELIVERIES.table].name))
            # A caller's transaction may hold deferred foreign key checks of rows it wrote
            # (tests do): run them now, PostgreSQL detaches no table with checks pending.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            # Detached, not dropped: a DROP removes the files at commit, under these locks
            # (about 0.2 s a GB here). The files go below, with no lock anyone waits on.
            for history in HISTORY:
                if history.table in found:
                    name = found[history.table].name
                    cursor.execute(f"ALTER TABLE {history.table} DETACH PARTITION {name}")
                    cursor.execute(f"ALTER TABLE {name} RENAME TO {name}{DETACHED}")
    except DatabaseError as exc:
        # Most often the lock timeout behind a long transaction: the next run tries again.
        return PartitionStep("kept", span, names, f"not now, next run: {exc}".strip())
    locked = time.monotonic() - started
    left = _detached_removed()
    return PartitionStep(
        "dropped",
        span,
        names,
        f"about {rows} rows, history locked for {locked * 1000:.0f} ms{left}",
        time.monotonic() - started,
        locked,
    )


def _detached_removed() -> str:
    """Remove the partitions drops detached (this run's, and any a killed run left), and
    say what is left for the next run.

    Each is emptied by TRUNCATE first, which holds its own lock only while its files are
    unlinked; one DROP of the empty tables then takes the tenants' and endpoints' tables
    for an instant (a detached partition has foreign keys of its own, whose triggers live
    on them), waiting for them at most LOCK_TIMEOUT."""
    detached = []
    with connection.cursor() as cursor:
        for history in HISTORY:
            # A range of names, which the catalog's index on them serves.
            cursor.execute(
                "SELECT relname FROM pg_class WHERE relname >= %s::name AND relname < %s::name"
                " AND right(relname, %s) = %s AND relkind = 'r' AND pg_table_is_visible(oid)",
                [f"{history.table}_p", f"{history.table}_q", len(DETACHED), DETACHED],
            )
            detached += [name for (name,) in cursor.fetchall()]
    emptied = []
    for name in detached:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # as in _drop
                cursor.execute(f"TRUNCATE {name}")
            emptied.append(name)
        except DatabaseError:
            pass
    left = [name for name in detached if name not in emptied]
    if emptied:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                cursor.execute(f"DROP TABLE {', '.join(emptied)}")
        except DatabaseError:
            left = detached
    return f"; left for the next run: {', '.join(left)}" if left else ""


def _unfinished(cursor: CursorWrapper, lo: int, hi: int, found: dict[str, Partition]) -> str:
    """Why the interval must stay, or ""."""
    statuses = [str(s) for s in UNFINISHED]
    part = found.get(DELIVERIES.table)
    if part is not None and (unfinished := _an_unfinished(cursor, part.name)):
        return f"it holds unfinished deliveries ({unfinished}, ...)"
    # A delivery is made a few milliseconds after its event: one of a later interval may
    # need an event of this one (index on event_id, in the later partitions only).
    cursor.execute(
        "SELECT id FROM deliveries_delivery WHERE event_id >= %s AND event_id < %s"
        " AND id >= %s AND status = ANY(%s) LIMIT 1",
        [EVENTS.bound(lo), EVENTS.bound(hi), DELIVERIES.bound(hi), statuses],
    )
    if row := cursor.fetchone():
        return f"an unfinished delivery of a later interval needs its events ({row[0]})"
    return ""


def _an_unfinished(cursor: CursorWrapper, part: str) -> str | None:
    """The id of an unfinished delivery in the deliveries partition `part`, if any: one
    branch per status, each served by that status's partial index."""
    statuses = [str(s) for s in UNFINISHED]
    cursor.execute(
        " UNION ALL ".join(
            f"(SELECT id FROM {part} WHERE status = %s LIMIT 1)"  # noqa: S608 (a catalog name)
            for _ in statuses
        ),
        statuses,
    )
    row = cursor.fetchone()
    return None if row is None else row[0]


class ClaimBounds(NamedTuple):
    """The delivery ids and event ids a claim looks between, as constants PostgreSQL
    prunes partitions with ('' for no bound)."""

    floor: str
    event_floor: str
    ceiling: str
    event_ceiling: str
    # Where a claim reads and updates deliveries: the one partition holding the whole
    # range when there is one (PostgreSQL then plans a plain table, not a partitioned
    # one: 7-15 % of a claim), else the table.
    deliveries: str = DELIVERIES.table


EVERY_PARTITION = ClaimBounds("", "", "", "")
# How far the bounds reach past now, both ways: a delivery made by a clock this far
# ahead of the database's or behind it, or by a transaction this long, or after the
# worker read the bounds (every few seconds), is inside them; and an event is made
# this long at most before its deliveries (in the same transaction, at ingestion).
CLAIM_MARGIN_MS = 60_000


def claim_bounds(*, now_ms: int | None = None) -> ClaimBounds:
    """The ids a claim must look between, so that PostgreSQL plans it over the partitions
    that can hold a pending delivery only (with a month of daily partitions, planning a
    claim over all of them took 6-10 ms, against 0.7 ms; over the current one, the two
    made ahead and DEFAULT, still half as much again as over the current one).

    The floor is the start of the oldest deliveries partition holding an unfinished
    delivery, and never later than a minute ago (events a minute older still). The
    ceiling is the end of the current interval, or of the next one in the interval's
    last minute (events alike). Most of the time a claim then plans over this
    interval's deliveries and the older ones holding retries, and one more partition of
    events; when the range lies in one deliveries partition, the bounds name it and the
    claim reads it as a plain table. EVERY_PARTITION when history is not
    partitioned or when its DEFAULT partition holds an unfinished delivery (an old id,
    one a replay put back, or one of an interval whose partition was not made in time).
    A delivery made pending in an older partition after this was read (a replay, a
    retry of a dead one) waits until the next reading: the worker reads it every few
    seconds."""
    if not history_partitioned():
        return EVERY_PARTITION
    now_ms = _now_ms() if now_ms is None else now_ms
    step = interval_ms()
    oldest = now_ms - CLAIM_MARGIN_MS
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname, pg_get_expr(child.relpartbound, child.oid)"
            " FROM pg_inherits i JOIN pg_class child ON child.oid = i.inhrelid"
            " WHERE i.inhparent = %s::regclass",
            [DELIVERIES.table],
        )
        spans: list[tuple[int | None, int | None, str]] = []
        for name, bound in cursor.fetchall():
            match = _BOUND.match(bound)
            if match is None:
                spans.append((None, None, name))
            else:
                spans.append((id_millisecond(match.group(1)), id_millisecond(match.group(2)), name))
        # The default partition first, then the ranged ones oldest first.
        spans.sort(key=lambda span: (span[0] is not None, span[0] or 0))
        for start, _, name in spans:
            if start is not None and start >= oldest:
                break
            if _an_unfinished(cursor, name) is not None:
                if start is None:
                    return EVERY_PARTITION
                oldest = start
                break
    ceiling = ((now_ms + CLAIM_MARGIN_MS) // step + 1) * step
    holding = [
        name
        for start, end, name in spans
        if start is not None and end is not None and start <= oldest and ceiling <= end
    ]
    return ClaimBounds(
        DELIVERIES.bound(oldest),
        EVENTS.bound(oldest - CLAIM_MARGIN_MS),
        DELIVERIES.bound(ceiling),
        EVENTS.bound(ceiling),
        holding[0] if holding else DELIVERIES.table,
    )


# Each endpoint's highest sequence in the partition {part}, by two probes of its
# (endpoint_id, sequence) index per endpoint (a skip scan): milliseconds under the lock,
# however many rows the partition holds. Counters in endpoint id order, as ingestion
# locks them.
_RAISE_PURGED_THROUGH = """
WITH RECURSIVE endpoints AS (
    (SELECT endpoint_id FROM {part} ORDER BY endpoint_id LIMIT 1)
    UNION ALL
    SELECT (SELECT p.endpoint_id FROM {part} p WHERE p.endpoint_id > e.endpoint_id
            ORDER BY p.endpoint_id LIMIT 1)
    FROM endpoints e WHERE e.endpoint_id IS NOT NULL
), highest AS (
    SELECT e.endpoint_id, (
        SELECT p.sequence FROM {part} p WHERE p.endpoint_id = e.endpoint_id
        ORDER BY p.sequence DESC LIMIT 1
    ) AS sequence
    FROM endpoints e WHERE e.endpoint_id IS NOT NULL
)
UPDATE deliveries_sequencecounter c SET purged_through = h.sequence
FROM highest h
WHERE c.endpoint_id = h.endpoint_id AND c.purged_through < h.sequence
"""


def _now_ms() -> int:
    return int(database_now().timestamp() * 1000)


def _utc(millisecond: int) -> str:
    at = datetime.fromtimestamp(millisecond / 1000, tz=UTC)
    whole_minute = millisecond % 60000 == 0
    return at.strftime("%Y-%m-%d %H:%M" if whole_minute else "%Y-%m-%d %H:%M:%S")
