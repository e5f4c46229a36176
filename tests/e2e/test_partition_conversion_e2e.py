"""The conversion to partitioned history (deliveries 0013) killed with `kill -9` in the
middle of moving rows, then run again: every row of the previous schema is in place,
byte for byte, and rows of ids made before the current alphabet sit in DEFAULT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from django.db import connection

from core.ids import id_at
from tests.migrations import latest, migrate
from tests.processes import ROOT, process_env

pytestmark = pytest.mark.e2e

BEFORE = [("deliveries", "0012_history_without_cross_table_constraints")]
TABLES = ("webhooks_event", "deliveries_delivery", "deliveries_attempt")
# 3 x 15,050 rows move in 12 batches of 5,000 (about 55 s per million rows on this
# machine: a few seconds), so a poll every 20 ms sees the move under way.
ROWS = 15_000
OLD_ALPHABET = 50  # ids made before the current alphabet: they belong in DEFAULT
DAY = 86_400_000


@pytest.fixture
def previous_schema(transactional_db) -> Iterator[None]:
    """The database at deliveries 0012; whatever happens, at the latest state after."""
    migrate(BEFORE)
    yield
    connection.close()
    migrate(latest())


def test_a_conversion_killed_mid_move_and_run_again_keeps_every_row(previous_schema, tmp_path):
    _history_of_the_previous_schema()
    before = {table: _checksum(table) for table in TABLES}
    assert before["deliveries_attempt"][0] == ROWS + OLD_ALPHABET

    log = tmp_path / "migrate.log"
    with open(log, "wb") as out:
        first = subprocess.Popen(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=process_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            moved = _wait_for_a_move_under_way(first, rows={t: n for t, (n, _) in before.items()})
            first.send_signal(signal.SIGKILL)
        finally:
            first.kill()
            first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL, log.read_text()
    # Killed mid-move: a table had some of its rows across, the rest still in the old one.
    assert any(0 < moved[table] < before[table][0] for table in TABLES), moved
    assert _leftover_tables(), "the first run had finished before the kill"

    second = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert second.returncode == 0, second.stdout + second.stderr

    assert not _leftover_tables()
    for table in TABLES:
        assert _kind(table) == "p", table
        assert _checksum(table) == before[table], table
    with connection.cursor() as cursor:
        for table, key in zip(TABLES, ("id", "id", "delivery_id"), strict=True):
            cursor.execute(
                f"SELECT tableoid::regclass::text, count(*) FROM {table}"
                f" WHERE {key} LIKE %s GROUP BY 1",
                ["%\\_aaaa%"],
            )
            assert cursor.fetchall() == [(f"{table}_default", OLD_ALPHABET)], table


def _history_of_the_previous_schema() -> None:
    """ROWS events, each with a delivery and an attempt, made over the last three days,
    and OLD_ALPHABET more with ids of the alphabet before; written by SQL, at once."""
    now = int(time.time() * 1000)
    made = [now - 3 * DAY + n * (3 * DAY // ROWS) for n in range(ROWS)]
    events = [id_at("evt", ms) for ms in made]
    deliveries = [id_at("dlv", ms + 1) for ms in made]
    for n in range(OLD_ALPHABET):
        events.append(f"evt_aaaaaaaaaaaaaaaaaaaaa{n:05d}")
        deliveries.append(f"dlv_aaaaaaaaaaaaaaaaaaaaa{n:05d}")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO webhooks_tenant (id, name, created_at) VALUES ('ten_k', 'k', now())"
        )
        cursor.execute(
            "INSERT INTO webhooks_endpoint (id, tenant_id, url, description, event_types,"
            " headers, filter, is_active, secret, previous_secrets, signing,"
            " tls_client_certificate, circuit_state, consecutive_failures, disabled_reason,"
            " created_at, updated_at) VALUES ('ep_k', 'ten_k', 'https://example.com/h', '',"
            " '[]', '{}', '', true, 'x', '[]', 'hmac-sha256', '', 'closed', 0, '', now(), now())"
        )
        cursor.execute(
            "INSERT INTO webhooks_event (id, tenant_id, type, data, created_at)"
            " SELECT e.id, 'ten_k', 'order.paid', jsonb_build_object('n', e.n, 'note', md5(e.id)),"
            " now() - e.n * interval '1 second' FROM unnest(%s::text[]) WITH ORDINALITY e(id, n)",
            [events],
        )
        cursor.execute(
            "INSERT INTO deliveries_delivery (id, tenant_id, event_id, endpoint_id, status,"
            " attempt_count, schedule_offset, last_error, sequence, created_at, updated_at)"
            " SELECT d.id, 'ten_k', e.id, 'ep_k', 'succeeded', 1, 0, '', d.n, now(), now()"
            " FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY d(id, event_id, n)"
            " JOIN webhooks_event e ON e.id = d.event_id",
            [deliveries, events],
        )
        cursor.execute(
            "INSERT INTO deliveries_attempt (delivery_id, number, started_at, duration_ms,"
            " status_code, error, response_body)"
            " SELECT id, 1, created_at, sequence % 1000, 200, '', 'ok ' || sequence"
            " FROM deliveries_delivery"
        )


def _wait_for_a_move_under_way(
    process: subprocess.Popen[bytes], *, rows: dict[str, int]
) -> dict[str, int]:
    """Rows in each new (partitioned) table once one of them holds some but not all of
    its rows: the run is then in the middle of moving a table."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, "the migration ended before a table was seen moving"
        if _leftover_tables():
            moved = {table: _count(table) for table in TABLES}
            if any(0 < moved[table] < rows[table] for table in TABLES):
                return moved
        time.sleep(0.02)
    raise AssertionError("no table was seen half moved within 120 s")


def _leftover_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE '%\\_unpartitioned'"
            " AND relkind = 'r' AND pg_table_is_visible(oid)"
        )
        return [name for (name,) in cursor.fetchall()]


def _kind(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relkind FROM pg_class WHERE relname = %s AND pg_table_is_visible(oid)",
            [table],
        )
        return cursor.fetchone()[0]


def _count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return cursor.fetchone()[0]


def _checksum(table: str) -> tuple[int, str]:
    """Rows and an md5 of every row's every column, in id order."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), md5(string_agg(t::text, E'\\n' ORDER BY t.id)) FROM {table} t"
        )
        count, digest = cursor.fetchone()
        return count, digest
