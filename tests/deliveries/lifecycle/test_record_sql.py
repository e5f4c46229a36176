"""Recording's, health's and the backlog sweep's statements are written once, whole
(deliveries/lifecycle/record_sql.py, backlog_sql.py): what runs is exactly that text, and
the text is pinned here (by its digest), so a change to how every result is written is
made on purpose. The SQLite pass runs this file too (tests/harness.py): the twins of the
embedded set-up run the same tests."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from deliveries.lifecycle import backlog_sql, record_sql
from deliveries.lifecycle.attempt_stats import DURATION_COLUMNS, attempt_minutes_add
from deliveries.lifecycle.endpoint_backlogs import endpoint_backlogs_waiting
from deliveries.lifecycle.health import open_circuits_claim_probes
from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.lifecycle.retry import Outcome
from deliveries.lifecycle.scheduling import deliveries_recover_expired_leases
from deliveries.models import Attempt, AttemptMinute, Delivery, EndpointMinute
from deliveries.results import SendResult
from deliveries.statuses import UNFINISHED
from deliveries.worker.claims import deliveries_claim
from tests.databases import postgresql_only, statements_run
from tests.factories import endpoint_row
from webhooks.models import Endpoint

MODULES = {"record_sql": record_sql, "backlog_sql": backlog_sql}

# The SHA-256 of each statement's text: whoever changes a statement reads it whole again
# (and the comment above it) and updates this.
PINNED = {
    "record_sql.APPLY_STATES": "5ea798263fcde05f2ce9cf60561e2be41d403bc7520295c0b5afc3a92739c98b",
    "record_sql.APPLY_STATES_IF_LEASE_EXPIRED": (
        "6056bfeb2f7c34abdfbc08d657e4be01614ab6cdcbcb2184349cd38e1b3faf45"
    ),
    "record_sql.INSERT_ATTEMPTS": (
        "a61e466f23e51e8f439ee97dc848f90d5fcb98da2a78d8f683f991cc4e7f9041"
    ),
    "record_sql.INSERT_ATTEMPTS_IGNORING_CONFLICTS": (
        "47e4c654ca201cc966a8696f2f820e2557fd2094ebbe4b224fc140b1ca0a0332"
    ),
    "record_sql.ENDPOINTS_NOT_CLOSED": (
        "0fec485060f1bb65b7d40e86f8542237ebd69120f577f21fe9c7754890586354"
    ),
    "record_sql.ENDPOINTS_NOT_CLOSED_SQLITE": (
        "b77ce1495218acdd0a92ace06ba105744238c52033cd794b76d31c7d8f81695b"
    ),
    "record_sql.FAILURES_RESET": "c9fbbb6e8cea533ef13b5c6f273bfc11a609fbcde9476d8371e36392420241b1",
    "record_sql.FAILURES_RESET_SQLITE": (
        "cfab3a52a8e3c1528b0a33fa199ba87050e095c24f2677ccfc1845916057b077"
    ),
    "record_sql.ANY_CIRCUIT_NOT_CLOSED": (
        "78413b56190a9b5415c929fde375e04be552d8949ed47100e54a588dccee0237"
    ),
    "record_sql.ATTEMPT_MINUTES_ADD": (
        "5fddd459d69c1549c1e276a2e6e6aed3c0a5e3be0dd6322c31e0c982f5bda438"
    ),
    "record_sql.ENDPOINT_MINUTES_ADD": (
        "28019b65ccf4dff191f9cd5e8620397349284b2a4ec44ab6c752cea01b2682b4"
    ),
    "record_sql.LINE_ENDS": "84a6c53e2634170eb4c34336b965f689ffb1f1f42cf26c416a5f495ee5408710",
    "backlog_sql.INACTIVE_WITH_PENDING": (
        "cccb702334d5d05b3c530c92a36e9daeb21a9198e482878de06438252ebf52e6"
    ),
    "backlog_sql.INACTIVE_WITH_PENDING_SQLITE": (
        "745350a9756cc2163bde709811743013dd39dd16f582456b9d7be145de7e5687"
    ),
}

TABLES = {
    "deliveries_delivery": Delivery,
    "deliveries_attempt": Attempt,
    "deliveries_attemptminute": AttemptMinute,
    "deliveries_endpointminute": EndpointMinute,
    "webhooks_endpoint": Endpoint,
}


def _text(name: str) -> str:
    module, constant = name.split(".")
    return getattr(MODULES[module], constant)


def _flat(sql: str) -> str:
    return " ".join(sql.split())


def test_the_statements_are_the_pinned_text() -> None:
    assert set(PINNED) == {
        f"{module}.{name}" for module, m in MODULES.items() for name in dir(m) if name.isupper()
    }
    for name, digest in PINNED.items():
        text = _text(name)
        assert hashlib.sha256(text.encode()).hexdigest() == digest, f"{name} changed:\n{text}"


def test_the_statements_name_the_tables_the_models_use() -> None:
    for table, model in TABLES.items():
        assert model._meta.db_table == table
    for name in PINNED:
        named = re.findall(r"\b((?:webhooks|deliveries)_[a-z]+)\b", _text(name))
        assert named and set(named) <= set(TABLES), (name, named)


def test_the_attempt_inserts_fill_every_column_but_the_id() -> None:
    columns = {f.column for f in Attempt._meta.concrete_fields} - {"id"}
    for sql in (record_sql.INSERT_ATTEMPTS, record_sql.INSERT_ATTEMPTS_IGNORING_CONFLICTS):
        found = re.search(r"INSERT INTO deliveries_attempt \(([^)]*)\)", sql)
        assert found and {c.strip() for c in found.group(1).split(",")} == columns


def test_the_minute_upsert_has_a_parameter_for_every_outcome() -> None:
    sql = record_sql.ATTEMPT_MINUTES_ADD
    assert set(re.findall(r"SELECT '(\w+)'", sql)) == set(Outcome)
    assert {f"%({outcome})s" for outcome in Outcome} <= set(re.findall(r"%\(\w+\)s", sql))


def test_the_endpoint_minute_upsert_adds_every_counter() -> None:
    sql = record_sql.ENDPOINT_MINUTES_ADD
    counters = {f.column for f in EndpointMinute._meta.concrete_fields} - {
        "id",
        "endpoint_id",
        "minute",
    }
    assert {*Outcome, *DURATION_COLUMNS} == counters
    found = re.search(r"INSERT INTO deliveries_endpointminute \(([^)]*)\)", sql)
    assert found and {c.strip() for c in found.group(1).split(",")} == counters | {
        "endpoint_id",
        "minute",
    }
    for column in counters:
        assert f"%({column})s" in sql
        assert f"{column} = deliveries_endpointminute.{column} + EXCLUDED.{column}" in sql


def test_the_line_ends_are_the_unfinished_deliveries() -> None:
    found = re.search(r"status IN \(([^)]*)\)", record_sql.LINE_ENDS)
    assert found and {s.strip(" '") for s in found.group(1).split(",")} == set(UNFINISHED)


def test_the_variants_differ_only_in_their_one_clause() -> None:
    # The lease sweep's: only expired leases; its attempts yield to its worker's.
    assert _flat(record_sql.APPLY_STATES_IF_LEASE_EXPIRED) == _flat(
        record_sql.APPLY_STATES
    ).replace(
        "d.attempt_count = v.claimed_count",
        "d.attempt_count = v.claimed_count AND d.lease_expires_at < statement_timestamp()",
    )
    assert _flat(record_sql.INSERT_ATTEMPTS_IGNORING_CONFLICTS) == _flat(
        f"{record_sql.INSERT_ATTEMPTS} ON CONFLICT DO NOTHING"
    )
    # SQLite's twins: the ids from a JSON array instead of an array.
    for postgresql, sqlite in (
        (record_sql.ENDPOINTS_NOT_CLOSED, record_sql.ENDPOINTS_NOT_CLOSED_SQLITE),
        (record_sql.FAILURES_RESET, record_sql.FAILURES_RESET_SQLITE),
    ):
        assert _flat(sqlite).replace(
            "id IN (SELECT value FROM json_each(%(ids)s))", "id = ANY(%(ids)s::text[])"
        ) == _flat(postgresql)


def _send(actor, n: int) -> None:
    for i in range(n):
        answer = actor.client.post(
            "/api/v1/events", {"type": "a.b", "data": {"i": i}}, format="json"
        )
        assert answer.status_code == 202


def _ok(claimed) -> list[Attempted]:
    return [
        Attempted(d, SendResult(200, None, b"ok", None, 5), timezone.now(), current_policy())
        for d in claimed
    ]


@pytest.mark.django_db
def test_a_recorded_batch_runs_those_statements(alice) -> None:
    shop, crm = (
        endpoint_row(alice.tenant),
        endpoint_row(alice.tenant),
    )
    _send(alice, 2)
    claimed = deliveries_claim(limit=10, policy=current_policy())
    # shop was failing and is healthy now; crm's circuit opened meanwhile (another batch).
    Endpoint.objects.filter(pk=shop.pk).update(consecutive_failures=3, failing_since=timezone.now())
    Endpoint.objects.filter(pk=crm.pk).update(circuit_state=Endpoint.Circuit.OPEN)
    with statements_run() as ran:
        recorded = attempts_record(outcomes=_ok(claimed))
    assert all(recorded) and len(recorded) == 4
    if connection.vendor == "sqlite":
        expected = [record_sql.ENDPOINTS_NOT_CLOSED_SQLITE, record_sql.FAILURES_RESET_SQLITE]
    else:
        expected = [
            record_sql.APPLY_STATES,
            record_sql.INSERT_ATTEMPTS,
            record_sql.ENDPOINTS_NOT_CLOSED,
            record_sql.FAILURES_RESET,
        ]
    expected += [record_sql.ATTEMPT_MINUTES_ADD, record_sql.ENDPOINT_MINUTES_ADD]
    assert [sql for sql in ran if sql in expected] == expected
    # One upsert per endpoint, sent together: each endpoint's minute counts its two.
    minutes = EndpointMinute.objects.values_list("endpoint_id", "success", "d_25")
    assert sorted(minutes) == sorted([(shop.id, 2, 2), (crm.id, 2, 2)])
    shop.refresh_from_db()
    assert (shop.consecutive_failures, shop.failing_since) == (0, None)
    crm.refresh_from_db()  # the locked path closed it: its circuit saw a success
    assert crm.circuit_state == Endpoint.Circuit.CLOSED
    assert Delivery.objects.filter(status=Delivery.Status.SUCCEEDED).count() == 4
    assert Attempt.objects.filter(status_code=200).count() == 4


@postgresql_only
@pytest.mark.django_db
def test_the_lease_sweep_runs_its_variants(alice) -> None:
    endpoint_row(alice.tenant)
    _send(alice, 2)
    claimed = deliveries_claim(limit=10, policy=current_policy())
    Delivery.objects.filter(pk=claimed[0].id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    with statements_run() as ran:
        assert deliveries_recover_expired_leases() == 1
    expected = [
        record_sql.APPLY_STATES_IF_LEASE_EXPIRED,
        record_sql.INSERT_ATTEMPTS_IGNORING_CONFLICTS,
    ]
    assert [sql for sql in ran if sql in expected] == expected
    assert Attempt.objects.get(delivery_id=claimed[0].id).error == "worker lost"


@postgresql_only
@pytest.mark.django_db
def test_a_keyed_delivery_joins_its_line_through_line_ends(alice) -> None:
    shop = endpoint_row(alice.tenant)
    keyed = {"type": "a.b", "data": {}, "ordering_key": "order-1"}
    with statements_run() as ran:
        for _ in range(2):
            answer = alice.client.post("/api/v1/events", keyed, format="json")
            assert answer.status_code == 202
    assert ran.count(record_sql.LINE_ENDS) == 2
    first, second = Delivery.objects.filter(endpoint_id=shop.id).order_by("sequence")
    assert (first.status, second.status) == (Delivery.Status.PENDING, Delivery.Status.HELD)
    assert second.blocked_by == first.id


@pytest.mark.django_db
def test_the_minute_upsert_adds_up_by_outcome(alice) -> None:
    at = datetime(2026, 11, 23, 10, 4, 5, tzinfo=UTC)
    with statements_run() as ran:
        attempt_minutes_add(counts={"success": 3, "retryable": 1}, at=at)
        attempt_minutes_add(counts={"success": 2, "fatal": 0}, at=at + timedelta(seconds=50))
        attempt_minutes_add(counts={"fatal": 0}, at=at)  # nothing to add: no statement
    assert ran == [record_sql.ATTEMPT_MINUTES_ADD] * 2
    rows = {(row.minute.minute, row.outcome): row.count for row in AttemptMinute.objects.all()}
    assert rows == {(4, "success"): 5, (4, "retryable"): 1}
    with pytest.raises(ValueError, match="delivered"):
        attempt_minutes_add(counts={"delivered": 1}, at=at)


@pytest.mark.django_db
def test_the_circuit_check_before_every_claim_is_one_statement(alice) -> None:
    crm = endpoint_row(alice.tenant)
    with statements_run() as ran:
        assert open_circuits_claim_probes() == (set(), [])
    assert ran == [record_sql.ANY_CIRCUIT_NOT_CLOSED]
    Endpoint.objects.filter(pk=crm.pk).update(
        circuit_state=Endpoint.Circuit.OPEN, probe_at=timezone.now() + timedelta(hours=1)
    )
    assert open_circuits_claim_probes() == ({crm.id}, [])


@pytest.mark.django_db
def test_the_backlog_sweep_finds_inactive_endpoints_with_pending_deliveries(alice) -> None:
    shop, crm, idle = (
        endpoint_row(alice.tenant),
        endpoint_row(alice.tenant),
        endpoint_row(alice.tenant),
    )
    _send(alice, 2)
    Endpoint.objects.filter(pk__in=[crm.pk, idle.pk]).update(is_active=False)
    Delivery.objects.filter(endpoint_id=idle.pk).update(status=Delivery.Status.DEAD)
    with statements_run() as ran:
        assert endpoint_backlogs_waiting() == [crm.id]
    expected = (
        backlog_sql.INACTIVE_WITH_PENDING_SQLITE
        if connection.vendor == "sqlite"
        else backlog_sql.INACTIVE_WITH_PENDING
    )
    assert expected in ran
    assert shop.is_active
