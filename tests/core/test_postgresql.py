"""The database backend's health check: no round trip for a healthy connection, and a
connection the server dropped (as a restart does) is replaced before a request uses it."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection, transaction

from tests.processes import Web

pytestmark = pytest.mark.django_db(transaction=True)

EVENT = {"type": "a.b", "data": {}}


def _other_connection() -> psycopg.Connection:
    return psycopg.connect(**connection.get_connection_params(), autocommit=True)


def _last_query_of(backend_pid: int) -> str:
    with _other_connection() as other:
        row = other.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s", [backend_pid]
        ).fetchone()
    return row[0] if row else ""


def test_a_healthy_connection_is_checked_without_a_query():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'last before the check'")
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    assert connection.is_usable()
    assert _last_query_of(pid) == "SELECT pg_backend_pid()"  # no SELECT 1 was sent


def test_a_connection_in_a_transaction_is_checked_with_a_query():
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        assert connection.is_usable()
        assert _last_query_of(pid) == "SELECT 1"


def _terminate_this_connection() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with _other_connection() as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    time.sleep(0.2)  # the server's goodbye reaches the socket


def test_a_connection_the_server_dropped_is_not_usable():
    _terminate_this_connection()
    try:
        assert not connection.is_usable()
    finally:
        connection.close()  # the test database's teardown needs a live one


@pytest.mark.e2e
def test_a_web_process_answers_at_once_after_its_connections_were_dropped(alice, tmp_path):
    web = Web(tmp_path, "web")
    try:
        for _ in range(4):  # both threads hold a connection
            assert web.call("POST", "/api/v1/events", key=alice.key, body=EVENT)[0] == 202
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            ours = cursor.fetchone()[0]
        with _other_connection() as other:  # what a PostgreSQL restart does to the web's
            terminated = other.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid NOT IN (pg_backend_pid(), %s) "
                "AND backend_type = 'client backend'",
                [ours],
            ).fetchone()
        assert terminated is not None and terminated[0] >= 1
        time.sleep(0.2)
        answers = [web.call("POST", "/api/v1/events", key=alice.key, body=EVENT) for _ in range(6)]
        assert [status for status, _ in answers] == [202] * 6, answers
    finally:
        web.process.stop()


def test_the_ingestion_statement_is_prepared_once_per_connection(alice):
    from deliveries.intake.ingest import event_ingest

    for _ in range(3):
        event_ingest(tenant=alice.tenant, event_type="a.b", data={})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements "
            "WHERE statement LIKE '%%WITH gate AS MATERIALIZED%%'"
        )
        assert cursor.fetchone()[0] == 1


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["evt_06h1avkgfymjbfajmkzzhesrf8"],
        ["NULL", "null", "", " padded ", "a,b", "{x}", 'say "hi"', "back\\slash", "é ☃"],
    ],
)
def test_a_text_array_literal_reads_back_as_the_same_strings(values):
    from core.postgresql.prepared import prepared_cursor, text_array

    with prepared_cursor() as cursor:
        cursor.execute("SELECT %s::text[]", [text_array(values)])
        assert cursor.fetchone()[0] == values


def test_connections_plan_without_jit():
    # With JIT the claim on partitioned history was compiled for 2-3 s per call once a
    # few intervals existed (the soak, bench/README.md); Homing's statements never gain.
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
