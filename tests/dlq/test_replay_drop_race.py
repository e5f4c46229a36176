"""A replay and retention's DROP of the same interval at once (PostgreSQL): whichever
takes its locks first, the other one sees what it did. A replay that read the event
before the drop holds the drop off until it commits, so the interval is then kept for the
pending delivery; a replay that comes while the drop holds its locks waits, then finds the
rows gone and puts them back from the letter. Either way the delivery goes out again with
its event id and sequence.

The two sides run on two connections; the replay is paused at a chosen statement, and
the drop is held open in a transaction, so the interleaving is the same every run."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from core.clock import database_now
from core.ids import id_millisecond
from deliveries.lifecycle.partitions import (
    DELIVERIES,
    PartitionStep,
    partitions_drop_expired,
    partitions_ensure,
)
from deliveries.models import Delivery
from dlq.models import DeadLetter
from dlq.services.replay import dead_letter_replay
from tests.databases import postgresql_only
from tests.factories import dead_letter_of, delivery_row, endpoint_model_via_api
from tests.processes import wait_until
from webhooks.models import Event

pytestmark = [postgresql_only, pytest.mark.django_db(transaction=True)]

MINUTE = 60_000


@pytest.fixture
def letter(alice, settings) -> DeadLetter:
    """A waiting dead letter whose event and delivery live in a one-minute interval ten
    days back, past a retention of an hour."""
    settings.HOMING_PARTITION_INTERVAL = 60
    settings.HOMING_RETENTION = 3600
    now = int(database_now().timestamp() * 1000)
    start = (now - 10 * 86_400_000) // MINUTE * MINUTE
    partitions_ensure(now_ms=start)
    ep = endpoint_model_via_api(alice)
    delivery = delivery_row(ep, "pending", attempts=3, made_ms=start + 1000)
    return dead_letter_of(delivery, "HTTP 503 after 3 attempts")


class ReplayThread:
    """`letter` replayed on a connection of its own. With pause_before, the replay stops
    just before its first statement starting so, until resume()."""

    def __init__(self, letter: DeadLetter, *, pause_before: str = "") -> None:
        self.letter, self.pause_before = letter, pause_before
        self.paused, self.go = threading.Event(), threading.Event()
        self.failed: list[BaseException] = []
        self.thread = threading.Thread(target=self._run)

    def start(self) -> ReplayThread:
        self.thread.start()
        if self.pause_before:
            assert self.paused.wait(30), "the replay never reached its pause"
        return self

    def resume(self) -> None:
        self.go.set()

    def join(self) -> None:
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the replay is still waiting"
        assert not self.failed, self.failed

    def _pause(self, execute, sql, params, many, context):
        if self.pause_before and sql.startswith(self.pause_before) and not self.paused.is_set():
            self.paused.set()
            self.go.wait(30)
        return execute(sql, params, many, context)

    def _run(self) -> None:
        try:
            copy = DeadLetter.objects.select_related("endpoint").get(pk=self.letter.pk)
            with connection.execute_wrapper(self._pause):
                dead_letter_replay(dead_letter=copy)
        except BaseException as exc:  # reported by join()
            self.failed.append(exc)
        finally:
            connection.close()


def test_a_replay_that_read_the_event_first_holds_the_drop_off(letter):
    # Paused after it checked what history is left, before it moves the delivery.
    replay = ReplayThread(letter, pause_before='UPDATE "deliveries_delivery"').start()
    try:
        during = _its_interval(letter, partitions_drop_expired())
    finally:
        replay.join()
    # The drop waited for the replay's locks, gave up at its lock timeout, and dropped
    # nothing; the next one sees the replayed delivery pending and keeps the interval.
    assert [o.action for o in during] == ["kept"] and "not now" in during[0].detail, during
    after = _its_interval(letter, partitions_drop_expired())
    assert [o.action for o in after] == ["kept"] and "unfinished" in after[0].detail, after
    _replayed_as_it_was(letter)


def test_a_replay_during_the_drop_waits_and_puts_the_rows_back(letter):
    with transaction.atomic():
        dropped = _its_interval(letter, partitions_drop_expired())
        assert [o.action for o in dropped] == ["dropped"], dropped
        replay = ReplayThread(letter).start()
        # The drop is not committed yet: the replay waits for its locks.
        wait_until(_a_backend_waits_for_a_lock, timeout=30, message="the replay did not wait")
    # Committed: the replay goes on, finds the rows gone and puts them back.
    replay.join()
    _replayed_as_it_was(letter, restored=True)


def _its_interval(letter: DeadLetter, outcomes: list[PartitionStep]) -> list[PartitionStep]:
    """The outcomes for the interval of the letter's delivery (the next two expired too)."""
    made = id_millisecond(letter.delivery_id)
    assert made is not None
    name = DELIVERIES.name_at(made // MINUTE * MINUTE)
    return [o for o in outcomes if name in o.partitions]


def _a_backend_waits_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0] > 0


def _replayed_as_it_was(letter: DeadLetter, *, restored: bool = False) -> None:
    delivery = Delivery.objects.get(pk=letter.delivery_id)
    assert delivery.status == "pending" and delivery.sequence == letter.sequence
    assert delivery.event_id == letter.event_id
    assert Event.objects.get(pk=letter.event_id).data == letter.event_data
    assert DeadLetter.objects.get(pk=letter.pk).replayed_at is not None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM deliveries_delivery WHERE id = %s",
            [letter.delivery_id],
        )
        where = cursor.fetchone()[0]
    assert where.endswith("_default") == restored, where
