"""Events, deliveries and attempts partitioned by time on PostgreSQL (DESIGN.md 25,
deliveries/lifecycle/partitions.py); SQLite keeps plain tables.

The conversion loses nothing and can be killed at any moment and run again:
1. one short transaction swaps names: the plain table becomes `<table>_unpartitioned`
   (its indexes and constraints renamed likewise) and a partitioned table takes its
   name, with the same columns, defaults, checks, indexes and foreign keys, a DEFAULT
   partition and one partition per interval from the oldest row's to two ahead. From
   then on the application writes into the new table.
2. rows MOVE in batches, each batch one transaction: deleted from the old table and
   inserted into the new one by one statement. Whatever is still in the old table is
   what is left to copy: a killed run goes on from there.
3. the empty old table is dropped.
Running it with the application stopped is the quick way; with it running nothing is
lost either, but rows not moved yet are out of sight until they are (docs/deploy.md).

The reverse moves the rows back into plain tables the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.db import migrations

from core.ids import id_millisecond
from deliveries.lifecycle.partitions import partition_indexes_named, partitions_ensure

BATCH_ROWS = 5000


@dataclass(frozen=True)
class Table:
    name: str
    key: str  # the partition key
    partitioned_pk: str
    plain_pk: str
    keyset: str  # the old table's unique order for moving rows


TABLES = [
    Table("webhooks_event", "id", "id", "id", "id"),
    Table("deliveries_delivery", "id", "id", "id", "id"),
    # The primary key of a partitioned table must contain its key.
    Table("deliveries_attempt", "delivery_id", "delivery_id, id", "id", "id"),
]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        # Constraints INTO these tables would make every partition drop check them (the
        # dead letters' references: they keep what a replay needs, dlq/models.py).
        for table, name in _rows(
            cursor,
            "SELECT conrelid::regclass::text, conname FROM pg_constraint"
            " WHERE contype = 'f' AND confrelid::regclass::text = ANY(%s)",
            [[t.name for t in TABLES]],
        ):
            cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        oldest = None
        for table in TABLES:
            if _kind(cursor, table.name) == "r":
                _swap(cursor, table, partitioned=True)
            if table.key == "id" and _kind(cursor, f"{table.name}_unpartitioned") == "r":
                old = f"{table.name}_unpartitioned"
                first = _rows(cursor, f"SELECT min(id) FROM {old}")[0][0]  # noqa: S608
                made = id_millisecond(first) if first else None
                oldest = made if oldest is None or (made and made < oldest) else oldest
    # A partition per interval from the oldest row's on, so that retention drops them.
    partitions_ensure(since_ms=oldest)
    _move_all(schema_editor, suffix="_unpartitioned")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table in TABLES:
            if _kind(cursor, table.name) == "p":
                _swap(cursor, table, partitioned=False)
    _move_all(schema_editor, suffix="_partitioned")


def _kind(cursor, name: str) -> str | None:
    found = _rows(
        cursor,
        "SELECT relkind FROM pg_class WHERE relname = %s AND pg_table_is_visible(oid)",
        [name],
    )
    return found[0][0] if found else None


def _rows(cursor, sql: str, params: list | None = None) -> list[tuple]:
    cursor.execute(sql, params)
    return cursor.fetchall()


def _swap(cursor, table: Table, *, partitioned: bool) -> None:
    """In one transaction (the caller's atomic block is off: see Migration.atomic)."""
    suffix = "_unpartitioned" if partitioned else "_partitioned"
    old = f"{table.name}{suffix}"
    cursor.execute("BEGIN")
    try:
        constraints = _rows(
            cursor,
            "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'f') ORDER BY conname",
            [table.name],
        )
        indexes = _rows(
            cursor,
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid"
            " AND k.conrelid = i.indrelid) ORDER BY c.relname",
            [table.name],
        )
        options = _rows(
            cursor,
            "SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class"
            " WHERE relname = %s AND pg_table_is_visible(oid)",
            [f"{table.name}_default" if not partitioned else table.name],
        )
        options_sql = f" WITH ({options[0][0]})" if options and options[0][0] else ""
        cursor.execute(f"ALTER TABLE {table.name} RENAME TO {old}")
        for name, kind, _ in constraints:
            if kind in ("p", "u"):  # renames its index too
                cursor.execute(f'ALTER TABLE {old} RENAME CONSTRAINT "{name}" TO "{_aside(name)}"')
            else:
                cursor.execute(f'ALTER TABLE {old} DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cursor.execute(f'ALTER INDEX "{name}" RENAME TO "{_aside(name)}"')
        partition_by = f" PARTITION BY RANGE ({table.key})" if partitioned else options_sql
        cursor.execute(
            f"CREATE TABLE {table.name} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
            f" INCLUDING IDENTITY INCLUDING STORAGE){partition_by}"
        )
        pk = table.partitioned_pk if partitioned else table.plain_pk
        for name, kind, definition in constraints:
            if kind == "p":
                definition = f"PRIMARY KEY ({pk})"
            cursor.execute(f'ALTER TABLE {table.name} ADD CONSTRAINT "{name}" {definition}')
        for _, definition in indexes:
            # Read before the rename, so it names the table by its name, now the new one's
            # (ONLY: a partitioned table's own definition; the new index covers the lot).
            cursor.execute(definition.replace(" ON ONLY ", " ON ", 1))
        if partitioned:
            cursor.execute(
                f"CREATE TABLE {table.name}_default PARTITION OF {table.name} DEFAULT{options_sql}"
            )
            partition_indexes_named(cursor, table=table.name, partition=f"{table.name}_default")
        identity = _rows(
            cursor,
            "SELECT pg_get_serial_sequence(%s, 'id')",
            [table.name],
        )[0][0]
        if identity:  # attempts: new ids go on after the old ones
            cursor.execute(
                f"SELECT setval(%s, greatest((SELECT max(id) FROM {old}), 1))",  # noqa: S608
                [identity],
            )
        cursor.execute("COMMIT")
    except BaseException:
        cursor.execute("ROLLBACK")
        raise


def _aside(name: str) -> str:
    return f"{name[:50]}_swapped"


def _move_all(schema_editor, *, suffix: str) -> None:
    started = time.monotonic()
    moved = 0
    with schema_editor.connection.cursor() as cursor:
        for table in TABLES:
            old = f"{table.name}{suffix}"
            if _kind(cursor, old) is None:
                continue
            after = None
            while True:
                # One batch, one transaction: gone from the old table exactly when it is
                # in the new one.
                where = f"WHERE {table.keyset} > %s" if after is not None else ""
                cursor.execute(
                    f"""
                    WITH batch AS (
                        SELECT {table.keyset} AS k FROM {old} {where}
                        ORDER BY {table.keyset} LIMIT {BATCH_ROWS}
                    ), gone AS (
                        DELETE FROM {old} o USING batch b WHERE o.{table.keyset} = b.k
                        RETURNING o.*
                    ), moved AS (
                        INSERT INTO {table.name} SELECT * FROM gone RETURNING {table.keyset}
                    )
                    SELECT count(*), max({table.keyset}) FROM moved
                    """,  # noqa: S608 (names are this module's constants)
                    [after] if after is not None else [],
                )
                count, last = cursor.fetchone()
                if not count:
                    break
                moved, after = moved + count, last
            cursor.execute(f"DROP TABLE {old}")
    if moved:
        rate = moved / max(time.monotonic() - started, 1e-6)
        print(f"\n  moved {moved} rows of history ({rate:.0f} rows/s)", flush=True)


class Migration(migrations.Migration):
    # Each step commits on its own (the swap, each batch): a killed run keeps what it did,
    # and every step checks what is done already (0012 before it is all or nothing).
    atomic = False

    dependencies = [
        ("deliveries", "0012_history_without_cross_table_constraints"),
        ("webhooks", "0015_event_trace_context"),
        # The dead letters keep what a replay needs and no longer hold foreign keys into
        # these tables (dlq 0003); any other foreign key into them is dropped here.
        ("dlq", "0004_dead_letters_fill_kept_history"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
