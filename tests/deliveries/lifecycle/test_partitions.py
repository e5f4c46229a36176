"""History partitioned by time (PostgreSQL): partitions made ahead, expired intervals
dropped with the catch-up feed's boundary, unfinished deliveries kept, dry runs.

The migration made day partitions around today; these tests work ten days back with
one-minute intervals, where nothing else lives."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from core.clock import database_now
from deliveries.lifecycle import record_sql
from deliveries.lifecycle.partitions import (
    DELIVERIES,
    EVENTS,
    EVERY_PARTITION,
    ClaimBounds,
    claim_bounds,
    partitions_drop_expired,
    partitions_ensure,
    partitions_list,
)
from deliveries.lifecycle.policy import current_policy
from deliveries.models import Delivery, SequenceCounter
from deliveries.worker import claim_sql
from deliveries.worker.claims import deliveries_claim_shares
from dlq.models import DeadLetter
from dlq.services.retention import retention_purge
from tests.databases import postgresql_only
from tests.factories import delivery_row, endpoint_model_via_api
from webhooks.models import Event

pytestmark = postgresql_only

MINUTE = 60_000
HISTORY = ("webhooks_event", "deliveries_delivery", "deliveries_attempt")


@pytest.fixture
def base(db, settings) -> int:
    """The start of a one-minute interval ten days ago, and its partitions and the next
    two's made."""
    settings.HOMING_PARTITION_INTERVAL = 60
    settings.HOMING_RETENTION = 3600
    now = int(database_now().timestamp() * 1000)
    start = (now - 10 * 86_400_000) // MINUTE * MINUTE
    made_in_the_end(lambda: partitions_ensure(now_ms=start))
    return start


def made_in_the_end(ensure) -> None:
    """Run partitions_ensure until nothing is left for a next run: behind another
    session's lock (on a busy machine, a process of an earlier test still finishing) a
    create gives up after its lock timeout, as the scheduler's would."""
    for _ in range(20):
        if not [step for step in ensure() if step.action == "skipped"]:
            return
    raise AssertionError("partitions still skipped after 20 runs")


@pytest.fixture
def ep(alice):
    return endpoint_model_via_api(alice)


def partition_of(table: str, row_id: str, key: str = "id") -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE {key} = %s", [row_id])
        return cursor.fetchone()[0]


def spans() -> set[tuple[str, int | None, int | None]]:
    return {(p.table, p.start_ms, p.end_ms) for p in partitions_list()}


def feed(alice, endpoint_id: str, after: int):
    return alice.client.get(f"/api/v1/endpoints/{endpoint_id}/messages", {"after": after})


def test_the_current_interval_and_two_ahead_exist_and_rows_land_in_them(base, ep):
    for table in HISTORY:
        for k in range(3):
            assert (table, base + k * MINUTE, base + (k + 1) * MINUTE) in spans()
    assert partitions_ensure(now_ms=base) == []  # nothing twice

    delivery = delivery_row(ep, made_ms=base + MINUTE + 5)

    second = [p for p in partitions_list() if p.start_ms == base + MINUTE]
    names = {p.table: p.name for p in second}
    assert partition_of("webhooks_event", delivery.event_id) == names["webhooks_event"]
    assert partition_of("deliveries_delivery", delivery.id) == names["deliveries_delivery"]
    # Attempts live in their delivery's interval.
    assert (
        partition_of("deliveries_attempt", delivery.id, key="delivery_id")
        == names["deliveries_attempt"]
    )


def test_a_drop_moves_the_feed_boundary_to_one_above_what_is_gone(alice, base, ep):
    gone = [delivery_row(ep, made_ms=base + n) for n in (1, 2)]  # sequences 1, 2
    waiting = delivery_row(ep, "pending", made_ms=base + MINUTE + 1)  # 3
    now = delivery_row(ep)  # 4, in today's partition
    assert [d.sequence for d in (*gone, waiting, now)] == [1, 2, 3, 4]

    outcomes = partitions_drop_expired()

    assert [o.action for o in outcomes] == ["dropped", "kept", "dropped"], outcomes[0].detail
    assert "unfinished deliveries" in outcomes[1].detail
    assert not Delivery.objects.filter(pk__in=[d.pk for d in gone]).exists()
    assert not Event.objects.filter(pk__in=[d.event_id for d in gone]).exists()
    expired = feed(alice, ep.id, after=0)
    assert expired.status_code == 410
    assert expired.json()["oldest_sequence"] == 3
    assert [m["sequence"] for m in feed(alice, ep.id, after=2).json()["results"]] == [3, 4]

    Delivery.objects.filter(pk=waiting.pk).update(status="succeeded", next_attempt_at=None)
    assert [o.action for o in partitions_drop_expired()] == ["dropped"]
    assert feed(alice, ep.id, after=2).json()["oldest_sequence"] == 4
    assert SequenceCounter.objects.get(pk=ep.pk).purged_through == 3
    assert Delivery.objects.get().pk == now.pk


def test_an_interval_whose_events_a_later_unfinished_delivery_needs_is_kept(base, ep):
    # Its event made in the last millisecond of the first interval, the delivery in the
    # first of the next: the first interval holds no delivery, only the event it needs.
    straddling = delivery_row(ep, "pending", made_ms=base + MINUTE - 1)
    assert partition_of("deliveries_delivery", straddling.id).endswith(
        next(p.name for p in partitions_list() if p.start_ms == base + MINUTE)[-15:]
    )

    first = partitions_drop_expired()[0]

    assert first.action == "kept" and "later interval needs its events" in first.detail
    assert Event.objects.filter(pk=straddling.event_id).exists()


def test_a_dry_run_changes_nothing_and_says_what_it_would_do(base, ep):
    delivery_row(ep, made_ms=base + 1)
    before = spans()

    dry = partitions_drop_expired(dry_run=True)

    assert [o.action for o in dry] == ["dropped", "dropped", "dropped"]
    assert spans() == before
    assert Delivery.objects.count() == 1
    assert SequenceCounter.objects.get(pk=ep.pk).purged_through == 0


def test_retention_drops_partitions_and_the_settled_dead_letters_of_their_events(base, ep):
    replayed = delivery_row(ep, "dead", made_ms=base + 1, dead_letter="replayed")
    waiting = delivery_row(ep, "dead", made_ms=base + 2, dead_letter="waiting")

    report = retention_purge()

    assert report.partitions == 9  # three intervals of three tables
    assert not Event.objects.filter(pk__in=[replayed.event_id, waiting.event_id]).exists()
    # The waiting one keeps what its replay needs; the replayed one is done with.
    assert list(DeadLetter.objects.values_list("delivery_id", flat=True)) == [waiting.pk]


def test_the_command_lists_creates_and_drops(base, ep, settings):
    delivery_row(ep, "pending", made_ms=base + 1)
    out = io.StringIO()

    call_command("partitions", "--dry-run", stdout=out)
    dry = out.getvalue()
    assert "deliveries_delivery_default" in dry and "rows" in dry and "size" in dry
    assert "(dry run) kept" in dry and "unfinished deliveries" in dry
    assert "(dry run) dropped" in dry  # the two intervals after it
    assert len(partitions_list()) == len(spans())

    out = io.StringIO()
    call_command("partitions", stdout=out)
    done = out.getvalue()
    assert "kept" in done and "dropped" in done and "(dry run)" not in done
    starts = {p.start_ms for p in partitions_list()}
    assert base in starts and base + MINUTE not in starts


def test_every_partition_has_every_index_of_its_table_and_each_is_valid(base):
    # Indexes added after the conversion (AddIndexOnline: ON ONLY the table, then
    # CONCURRENTLY per partition, attached) and partitions made after them alike.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT parent.relname, part.relname,"
            " (SELECT count(*) FROM pg_index x WHERE x.indrelid = parent.oid),"
            " (SELECT count(*) FROM pg_index x WHERE x.indrelid = part.oid AND x.indisvalid),"
            " (SELECT bool_and(x.indisvalid) FROM pg_index x WHERE x.indrelid = parent.oid)"
            " FROM pg_class parent JOIN pg_inherits i ON i.inhparent = parent.oid"
            " JOIN pg_class part ON part.oid = i.inhrelid WHERE parent.relname = ANY(%s)",
            [list(HISTORY)],
        )
        rows = cursor.fetchall()
    assert {table for table, *_ in rows} == set(HISTORY)
    assert [row for row in rows if row[2] != row[3] or not row[4]] == []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename LIKE 'deliveries_delivery_p%%'"
            " AND indexname LIKE 'delivery_endpoint_held_p%%'"
        )
        assert cursor.fetchone()[0] >= 3  # today and the two ahead, at least


def claim_plan(bounds: ClaimBounds) -> str:
    params: dict[str, Any] = {
        "endpoint_ids": ["ep_none"], "shares": [10], "lease_seconds": 30,
        "any_attempt": True, "first_attempts": False, "floor": bounds.floor,
        "event_floor": bounds.event_floor, "ceiling": bounds.ceiling,
        "event_ceiling": bounds.event_ceiling,
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + claim_sql.on(claim_sql.CLAIM, bounds.deliveries), params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_claims_plan_only_the_partitions_that_can_hold_a_pending_delivery(base, ep):
    old = delivery_row(ep, "pending", made_ms=base + 1)  # ten days back
    bounds = claim_bounds()
    assert "" < bounds.floor <= old.id and bounds.event_floor <= old.event_id
    # Due (as a replay would make it), it is claimed within the bounds.
    Delivery.objects.filter(pk=old.pk).update(next_attempt_at=database_now())
    claimed = deliveries_claim_shares(shares={ep.id: 10}, policy=current_policy(), bounds=bounds)
    assert [d.id for d in claimed.deliveries] == [old.id]

    # Finished, it no longer holds the floor down: only the recent partitions are planned.
    Delivery.objects.filter(pk=old.pk).update(status="succeeded")
    recent = claim_bounds()
    assert recent[0] > old.id
    every = claim_plan(EVERY_PARTITION)
    some = claim_plan(recent)
    assert some.count("deliveries_delivery_p") < every.count("deliveries_delivery_p")
    assert some.count("webhooks_event_p") < every.count("webhooks_event_p")
    # Nor DEFAULT and the partitions made ahead: the ceiling is this interval's end.
    assert "_default" in every and "_default" not in some
    # The look for endpoints with work due, likewise.
    with connection.cursor() as cursor:
        plans = []
        for bounds in (EVERY_PARTITION, recent):
            params: dict[str, Any] = {"after": "", "limit": 10}
            params.update(floor=bounds.floor, ceiling=bounds.ceiling)
            cursor.execute(
                "EXPLAIN " + claim_sql.on(claim_sql.DUE_ENDPOINTS, bounds.deliveries), params
            )
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    assert plans[1].count("deliveries_delivery_p") < plans[0].count("deliveries_delivery_p")
    assert "_default" in plans[0] and "_default" not in plans[1]


def test_a_delivery_made_by_a_clock_a_little_ahead_is_claimed_within_the_bounds(base, ep):
    bounds = claim_bounds()
    ahead = delivery_row(ep, "pending", made_ms=int(database_now().timestamp() * 1000) + 30_000)
    assert bounds.ceiling > ahead.id and bounds.event_ceiling > ahead.event_id

    claimed = deliveries_claim_shares(shares={ep.id: 10}, policy=current_policy(), bounds=bounds)

    assert [d.id for d in claimed.deliveries] == [ahead.id]


def test_an_unfinished_delivery_in_the_default_partition_plans_every_partition(base, ep):
    # An id of the alphabet before the current one sorts after every new one: DEFAULT.
    delivery = delivery_row(ep, "pending")
    Delivery.objects.filter(pk=delivery.pk).update(id="dlv_zzzzzzzzzzzzzzzzzzzzzzzzzz")
    assert partition_of("deliveries_delivery", "dlv_zzzzzzzzzzzzzzzzzzzzzzzzzz").endswith(
        "_default"
    )
    assert claim_bounds() == EVERY_PARTITION


def tables_like(pattern: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname LIKE %s", [pattern])
        return sorted(name for (name,) in cursor.fetchall())


def test_a_drop_detaches_under_the_locks_and_leaves_no_table_behind(base, ep):
    delivery_row(ep, made_ms=base + 1)
    first = sorted(p.name for p in partitions_list() if p.start_ms == base)

    outcome = partitions_drop_expired()[0]

    assert outcome.action == "dropped" and "history locked for" in outcome.detail
    assert tables_like("%_detached") == []
    assert [name for name in first if tables_like(name)] == []


def test_the_partitions_a_killed_drop_left_detached_are_removed_by_the_next_run(base, ep):
    # Killed between the drop's commit (detached, renamed) and the removal of the files.
    delivery_row(ep, made_ms=base + 1)
    part = next(p.name for p in partitions_list() if p.start_ms == base and "event" in p.table)
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE webhooks_event DETACH PARTITION {part}")
        cursor.execute(f"ALTER TABLE {part} RENAME TO {part}_detached")
    assert tables_like("%_detached") == [f"{part}_detached"]

    partitions_drop_expired(now_ms=base)  # nothing expired yet: only the leftover goes

    assert tables_like("%_detached") == []
    assert {p.start_ms for p in partitions_list()} >= {base + MINUTE}


def notices_during(call):
    """What PostgreSQL said at DEBUG1 while `call` ran on this connection."""
    said: list[str] = []
    connection.ensure_connection()
    handler = said.append
    connection.connection.add_notice_handler(lambda diag: handler(diag.message_primary or ""))
    with connection.cursor() as cursor:
        cursor.execute("SET client_min_messages = debug1")
    try:
        result = call()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET client_min_messages")
        connection.connection._notice_handlers.clear()
    return result, said


def test_attaching_beside_a_default_partition_holding_rows_does_not_scan_it(base, ep):
    # A converted installation's DEFAULT holds the ids made before the current alphabet:
    # without a constraint, every ATTACH scans it all under ACCESS EXCLUSIVE.
    old = delivery_row(ep)
    Event.objects.filter(pk=old.event_id).update(id="evt_zzzzzzzzzzzzzzzzzzzzzzzzzz")
    assert partition_of("webhooks_event", "evt_zzzzzzzzzzzzzzzzzzzzzzzzzz").endswith("_default")

    later = base + 5 * MINUTE  # the interval of later + 2 minutes is new, and ahead
    outcomes, said = notices_during(lambda: partitions_ensure(now_ms=later))

    assert {o.action for o in outcomes} == {"created"}, [str(o) for o in outcomes]
    assert any(
        "default partition" in m and "webhooks_event_default" in m and "implied" in m for m in said
    ), said
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'webhooks_event_default'::regclass"
            " AND contype = 'c'"
        )
        assert cursor.fetchall() == []  # the constraint goes with the ATTACH
    assert Event.objects.filter(pk="evt_zzzzzzzzzzzzzzzzzzzzzzzzzz").exists()


def test_a_constraint_a_failed_create_left_on_default_goes_before_its_interval_comes(base, ep):
    # Left by a run whose ATTACH gave up; now the interval is here, and its rows would go
    # to DEFAULT until it is created: the constraint must not refuse them.
    start = base + 3 * MINUTE
    outside = f"{EVENTS.name_at(start)}_outside"
    with connection.cursor() as cursor:
        cursor.execute(
            f"ALTER TABLE webhooks_event_default ADD CONSTRAINT {outside}"
            " CHECK (id < %s OR id >= %s) NOT VALID",
            [EVENTS.bound(start), EVENTS.bound(start + MINUTE)],
        )

    partitions_ensure(now_ms=start)

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_constraint WHERE conname = %s", [outside])
        assert cursor.fetchone()[0] == 0
    assert ("webhooks_event", start, start + MINUTE) in spans()


def test_an_older_interval_enters_the_claim_only_while_it_holds_an_unfinished_delivery(
    db, settings, ep
):
    settings.HOMING_PARTITION_INTERVAL = 86_400
    day = 86_400_000
    today = int(database_now().timestamp() * 1000) // day * day
    yesterday = today - day
    partitions_ensure(since_ms=yesterday)
    yesterdays = DELIVERIES.name_at(yesterday)
    delivery_row(ep, made_ms=yesterday + 1_000)  # succeeded
    noon = today + day // 2  # any moment of today but its first minute

    # Today's partition alone: the claim names it and plans a plain table.
    alone = claim_bounds(now_ms=noon)
    assert alone.deliveries == DELIVERIES.name_at(today)
    assert yesterdays not in claim_plan(alone)
    assert "Append" not in claim_plan(alone).split("CTE claimed")[0]

    retrying = delivery_row(ep, "pending", made_ms=yesterday + 2_000)
    bounds = claim_bounds(now_ms=noon)
    assert bounds.deliveries == "deliveries_delivery"
    assert yesterdays in claim_plan(bounds)
    claimed = deliveries_claim_shares(shares={ep.id: 10}, policy=current_policy(), bounds=bounds)
    assert [d.id for d in claimed.deliveries] == [retrying.id]


def test_a_recorded_batch_plans_only_the_partitions_its_ids_fall_in(base, ep):
    batch = [delivery_row(ep, "delivering", made_ms=base + MINUTE + n) for n in (1, 2)]
    states = [
        {"id": d.id, "claimed_count": 1, "status": "succeeded", "delay": None,
         "last_error": "", "new_count": 1}
        for d in batch
    ]  # fmt: skip
    params = {
        "now": database_now(), "states": json.dumps(states),
        "lowest": min(d.id for d in batch), "highest": max(d.id for d in batch),
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + record_sql.APPLY_STATES, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    planned = set(re.findall(r"deliveries_delivery_(p\d+|default)", plan))
    assert planned == {DELIVERIES.name_at(base + MINUTE).removeprefix("deliveries_delivery_")}


def test_in_an_intervals_last_minute_the_claim_reads_the_table_across_both(db, settings):
    settings.HOMING_PARTITION_INTERVAL = 86_400
    day = 86_400_000
    today = int(database_now().timestamp() * 1000) // day * day

    bounds = claim_bounds(now_ms=today + day - 30_000)

    # A delivery made by a clock a minute ahead is in tomorrow's partition.
    assert bounds.ceiling == DELIVERIES.bound(today + 2 * day)
    assert bounds.deliveries == "deliveries_delivery"


def test_a_claim_names_no_table_but_deliveries_or_its_partitions():
    with pytest.raises(ValueError):
        claim_sql.on(claim_sql.CLAIM, "webhooks_tenant; DROP TABLE x")
    assert "FROM deliveries_delivery_p20261128000000" in claim_sql.on(
        claim_sql.DUE_ENDPOINTS, "deliveries_delivery_p20261128000000"
    )
