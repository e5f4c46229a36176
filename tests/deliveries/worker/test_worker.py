"""The Worker owns its parts: starts them in a declared order, stops them in reverse, and
every delivery it holds leaves its ledger whatever happens to the attempt."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from deliveries.lifecycle.policy import current_policy
from deliveries.worker.ledger import Stage
from deliveries.worker.worker import Worker

ORDER = ["gatherers", "recorder", "releases", "sender", "parker", "claims", "watchdog"]


@pytest.fixture
def worker():
    created = Worker(capacity=4)
    created.sender.start()  # the event loop only: no claims, no database
    yield created
    created.sender.close()
    created.close()


def run(worker: Worker, coroutine):
    return asyncio.run_coroutine_threadsafe(coroutine, worker.sender.loop).result(timeout=10)


def in_flight(worker: Worker) -> SimpleNamespace:
    delivery = SimpleNamespace(id="dlv_1", attempt_count=1, endpoint_id="ep_1", tenant_id="ten_1")
    going, _ = worker.ledger.admit([delivery], worker.ledger.reserve(1), lease_seconds=60)  # type: ignore[list-item]  # the ledger reads only these fields
    assert going == [delivery]
    return delivery


def test_an_attempt_that_fails_before_reaching_the_recorder_leaves_the_ledger(
    worker, monkeypatch
) -> None:
    delivery = in_flight(worker)

    async def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(worker.attempts, "send", broken)
    with pytest.raises(RuntimeError):
        run(worker, worker.attempts.run(delivery, current_policy()))
    assert worker.ledger.in_hand == 0
    assert worker.ledger.open_to("ep_1") == 0


def test_an_attempt_leaves_the_ledger_once_its_result_is_recorded(worker, monkeypatch) -> None:
    delivery = in_flight(worker)
    submitted = []

    async def nothing_sent(*args):
        return None

    monkeypatch.setattr(worker.attempts, "send", nothing_sent)
    monkeypatch.setattr(worker.recorder, "submit", lambda o, done: submitted.append(done))
    run(worker, worker.attempts.run(delivery, current_policy()))
    assert worker.ledger.stages() == {Stage.RECORDING: 1}  # waiting for the recorder
    assert worker.ledger.open_to("ep_1") == 0  # the receiver is free already
    submitted[0](None)
    assert worker.ledger.in_hand == 0
    assert worker.drain(timeout=0.1)


@pytest.mark.django_db(transaction=True)
def test_start_starts_every_part_in_order_and_close_stops_each_in_reverse(monkeypatch) -> None:
    before = set(threading.enumerate())
    created = Worker(capacity=4)
    closed: list[str] = []
    for name, part, method in [
        ("recorder", created.recorder, "stop"),
        ("releases", created.releases, "close"),
        ("sender", created.sender, "close"),
        ("parker", created.parker, "close"),
        ("claims", created.claims, "close"),
    ]:
        monkeypatch.setattr(part, method, noted(closed, name, getattr(part, method)))
    created.start()
    assert created.started_parts == ORDER
    threads = [t for t in threading.enumerate() if t not in before]
    assert {t.name for t in threads} == {
        "homing-claims",
        "homing-sender",
        "homing-recorder",
        "homing-releases",
        "homing-parker",
        "homing-watchdog",
        "homing-publisher",
        "homing-counters",
    }
    created.stop()
    created.drain(timeout=1)
    created.close()
    assert closed == ["claims", "parker", "sender", "releases", "recorder"]
    assert created.started_parts == []
    assert [t.name for t in threads if t.is_alive()] == []


def test_a_worker_that_is_never_started_has_no_thread_and_closes() -> None:
    before = set(threading.enumerate())
    created = Worker(capacity=4)
    assert set(threading.enumerate()) == before
    created.close()
    assert set(threading.enumerate()) == before


def noted(closed: list[str], name: str, close):
    def closing(*args, **kwargs):
        closed.append(name)
        return close(*args, **kwargs)

    return closing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_worker_processes_share_each_endpoint_s_places(settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 50
    clock = Clock()
    first, second = Worker(capacity=400, clock=clock), Worker(capacity=400, clock=clock)
    try:
        first.claims.housekeeping()
        assert first.ledger.endpoint_cap == 50  # alone: the whole cap
        second.claims.housekeeping()
        assert second.ledger.endpoint_cap == 25  # two sending: half each
        clock.now += 1  # the first's next word is due
        first.claims.housekeeping()
        assert first.ledger.endpoint_cap == 25
    finally:
        first.close()
    clock.now += 1
    second.claims.housekeeping()
    assert second.ledger.endpoint_cap == 50  # the first said it stopped: the whole cap again
    second.close()


def test_a_worker_renewing_its_leases_stays_one_worker(settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 50
    clock = Clock()
    alone = Worker(capacity=400, clock=clock)
    try:
        name = alone.name
        for _ in range(3):
            clock.now += current_policy().lease_seconds  # a renewal and a word are due
            alone.claims.housekeeping()
        assert alone.name == name
        assert alone.ledger.endpoint_cap == 50  # still counted once
    finally:
        alone.close()
