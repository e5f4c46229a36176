"""Deduplicator behaviour, run against every store (memory, Redis, Django/PostgreSQL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, connections
from homing_receiver import Deduplicator, DedupStore, DuplicateInProgress, MemoryStore

# Short enough to keep the suite quick, long enough that a loaded CI machine still
# makes the in-between calls before the lease or ttl runs out.
SHORT = 2.0  # long enough that two calls under a loaded parallel pass fall within it
PAST_SHORT = 2.3


class Counter:
    def __init__(self, hold: float = 0.0) -> None:
        self.calls = 0
        self.hold = hold
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.calls += 1
        time.sleep(self.hold)


def run_in_threads(count: int, call: Callable[[], bool]) -> list[object]:
    """Start *count* threads at once; return each one's result or exception."""
    barrier = threading.Barrier(count)
    results: list[object] = [None] * count

    def worker(index: int) -> None:
        try:
            barrier.wait()
            results[index] = call()
        except Exception as exc:
            results[index] = exc
        finally:
            # Each thread opened its own database connection (DjangoStore).
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_fifty_concurrent_calls_run_the_handler_once(store: DedupStore, event_id: str) -> None:
    if type(store).__name__ == "DjangoStore" and connection.vendor != "postgresql":
        pytest.skip("concurrent claims are only promised on PostgreSQL")
    dedup = Deduplicator(store)
    handler = Counter(hold=0.2)

    results = run_in_threads(50, lambda: dedup.process(event_id, handler))

    assert handler.calls == 1
    assert results.count(True) == 1
    # Everyone else either saw it done or saw it in progress; nothing else went wrong.
    others = [r for r in results if r is not True]
    assert all(r is False or isinstance(r, DuplicateInProgress) for r in others), others


def test_it_runs_a_new_event_and_skips_it_afterwards(store: DedupStore, event_id: str) -> None:
    dedup = Deduplicator(store)
    handler = Counter()

    assert dedup.process(event_id, handler) is True
    assert dedup.process(event_id, handler) is False
    assert handler.calls == 1


def test_it_keeps_events_apart(store: DedupStore) -> None:
    dedup = Deduplicator(store)
    handler = Counter()

    for event in ("msg_alice", "msg_bob"):
        assert dedup.process(f"{event}_{id(store)}", handler) is True

    assert handler.calls == 2


def test_it_accepts_an_overlong_event_id(store: DedupStore) -> None:
    dedup = Deduplicator(store)
    # Longer than DjangoStore's key column; sender-chosen ids can be anything.
    long_id = "msg_" + "x" * 400

    assert dedup.process(long_id, Counter()) is True
    assert dedup.process(long_id, Counter()) is False
    assert dedup.process(long_id[:-1] + "y", Counter()) is True


def test_a_retry_runs_the_handler_after_it_raised(store: DedupStore, event_id: str) -> None:
    dedup = Deduplicator(store)

    def broken() -> None:
        raise RuntimeError("database of record is down")

    with pytest.raises(RuntimeError, match="database of record is down"):
        dedup.process(event_id, broken)

    handler = Counter()
    assert dedup.process(event_id, handler) is True
    assert handler.calls == 1


def test_it_raises_in_progress_while_another_call_holds_the_claim(
    store: DedupStore, event_id: str
) -> None:
    dedup = Deduplicator(store)
    seen: list[DuplicateInProgress] = []

    def handler() -> None:
        # A duplicate delivery arriving while the first one is still being handled.
        try:
            dedup.process(event_id, Counter())
        except DuplicateInProgress as exc:
            seen.append(exc)

    assert dedup.process(event_id, handler) is True
    assert len(seen) == 1
    assert seen[0].event_id == event_id
    assert event_id in str(seen[0])


def test_a_crashed_claim_frees_the_event_when_its_lease_ends(
    store: DedupStore, event_id: str
) -> None:
    # A worker claimed the event, then died without completing or releasing it.
    assert store.claim(event_id, "crashed-worker", SHORT) == "claimed"
    dedup = Deduplicator(store, lease=SHORT)
    handler = Counter()

    with pytest.raises(DuplicateInProgress):
        dedup.process(event_id, handler)
    time.sleep(PAST_SHORT)

    assert dedup.process(event_id, handler) is True
    assert handler.calls == 1
    assert dedup.process(event_id, handler) is False


def test_it_forgets_an_event_once_the_ttl_has_passed(store: DedupStore, event_id: str) -> None:
    dedup = Deduplicator(store, ttl=SHORT)
    handler = Counter()

    assert dedup.process(event_id, handler) is True
    assert dedup.process(event_id, handler) is False
    time.sleep(PAST_SHORT)

    assert dedup.process(event_id, handler) is True
    assert handler.calls == 2


def test_only_the_owner_may_complete_or_release_a_claim(store: DedupStore, event_id: str) -> None:
    # alice's lease ran out mid-handler and bob took the event over.
    assert store.claim(event_id, "alice", SHORT) == "claimed"
    time.sleep(PAST_SHORT)
    assert store.claim(event_id, "bob", 60) == "claimed"

    store.release(event_id, "alice")
    assert store.claim(event_id, "carol", 60) == "in_progress"
    assert store.complete(event_id, "alice", 60) is False
    assert store.claim(event_id, "carol", 60) == "in_progress"

    assert store.complete(event_id, "bob", 60) is True
    store.release(event_id, "bob")  # a late release must not undo "done"
    assert store.claim(event_id, "carol", 60) == "done"


def test_an_owner_whose_lease_lapsed_untouched_still_records_done(
    store: DedupStore, event_id: str
) -> None:
    assert store.claim(event_id, "alice", SHORT) == "claimed"
    time.sleep(PAST_SHORT)

    assert store.complete(event_id, "alice", 60) is True
    assert store.claim(event_id, "bob", 60) == "done"


def test_a_lease_shorter_than_the_handler_is_logged(
    store: DedupStore, event_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    dedup = Deduplicator(store, lease=SHORT)

    def slow_handler() -> None:
        time.sleep(PAST_SHORT)
        assert store.claim(event_id, "bob", 60) == "claimed"

    with caplog.at_level("WARNING", logger="homing_receiver"):
        assert dedup.process(event_id, slow_handler) is True

    assert "outlived its" in caplog.text


def test_a_failed_release_does_not_hide_the_handlers_error(event_id: str) -> None:
    class FlakyStore(MemoryStore):
        def release(self, key: str, owner: str) -> None:
            raise ConnectionError("store unreachable")

    def broken() -> None:
        raise ValueError("bad payload")

    with pytest.raises(ValueError, match="bad payload"):
        Deduplicator(FlakyStore()).process(event_id, broken)


def test_memory_store_expires_by_its_clock_and_sweeps_old_records() -> None:
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])
    dedup = Deduplicator(store, ttl=10)
    for n in range(999):
        dedup.process(f"msg_{n}", Counter())
    assert len(store) == 999

    now[0] += 11
    assert dedup.process("msg_1", Counter()) is True  # the 1000th claim sweeps

    assert len(store) == 1


@pytest.mark.parametrize("kwargs", [{"ttl": 0}, {"lease": -1}])
def test_it_refuses_a_non_positive_ttl_or_lease(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="positive"):
        Deduplicator(MemoryStore(), **kwargs)
