"""The Worker gives every slot back, whatever happens to an attempt."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from deliveries.lifecycle.policy import current_policy
from deliveries.worker.worker import Worker


@pytest.fixture
def worker():
    created = Worker(capacity=4)
    created.sender.start()  # the event loop only: no claims, no database
    yield created
    created.close()


def run(worker: Worker, coroutine):
    return asyncio.run_coroutine_threadsafe(coroutine, worker.sender.loop).result(timeout=10)


def test_a_slot_is_released_when_an_attempt_fails_before_reaching_the_recorder(
    worker, monkeypatch
) -> None:
    delivery = SimpleNamespace(id="dlv_1", attempt_count=1, endpoint_id="ep_1", tenant_id="ten_1")
    worker.slots.admit([delivery], worker.slots.reserve(1))

    async def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(worker, "_send", broken)
    with pytest.raises(RuntimeError):
        run(worker, worker._attempt(delivery, current_policy()))
    assert worker.slots.in_flight == 0


def test_a_slot_is_released_once_the_result_is_recorded(worker, monkeypatch) -> None:
    delivery = SimpleNamespace(id="dlv_1", attempt_count=1, endpoint_id="ep_1", tenant_id="ten_1")
    worker.slots.admit([delivery], worker.slots.reserve(1))
    submitted = []

    async def nothing_sent(*args):
        return None

    monkeypatch.setattr(worker, "_send", nothing_sent)
    monkeypatch.setattr(worker.recorder, "submit", lambda o, done: submitted.append(done))
    run(worker, worker._attempt(delivery, current_policy()))
    assert worker.slots.in_flight == 1  # waiting for the recorder
    submitted[0](None)
    assert worker.slots.in_flight == 0
    assert worker.drain(timeout=0.1)


def test_the_endpoint_slot_is_free_as_soon_as_the_response_is_in(worker, monkeypatch) -> None:
    delivery = SimpleNamespace(id="dlv_1", attempt_count=1, endpoint_id="ep_1", tenant_id="ten_1")
    worker.slots.admit([delivery], worker.slots.reserve(1))
    monkeypatch.setattr(worker.recorder, "submit", lambda o, done: None)

    async def answered(*args):
        return None

    monkeypatch.setattr(worker, "_send", answered)
    run(worker, worker._attempt(delivery, current_policy()))
    assert worker.slots.room("ep_1") == worker.slots.per_endpoint  # the receiver is free
    assert worker.slots.in_flight == 1  # the result is not recorded yet


@pytest.mark.django_db(transaction=True)
def test_start_starts_every_thread_and_close_stops_each() -> None:
    before = set(threading.enumerate())
    started = Worker(capacity=4).start()
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
    started.stop()
    started.drain(timeout=1)
    started.close()
    assert [t.name for t in threads if t.is_alive()] == []


def test_a_worker_that_is_never_started_has_no_thread_and_closes() -> None:
    before = set(threading.enumerate())
    created = Worker(capacity=4)
    assert set(threading.enumerate()) == before
    created.close()


def test_worker_processes_share_each_endpoint_s_places(settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 50
    first, second = Worker(capacity=400), Worker(capacity=400)
    try:
        first._share_endpoints()
        assert first.slots.per_endpoint == 50  # alone: the whole cap
        second._share_endpoints()
        assert second.slots.per_endpoint == 25  # two sending: half each
        first._workers_said = float("-inf")  # its next word is due
        first._share_endpoints()
        assert first.slots.per_endpoint == 25
    finally:
        first.close()
    second._workers_said = float("-inf")
    second._share_endpoints()
    assert second.slots.per_endpoint == 50  # the first said it stopped: the whole cap again
    second.close()


def test_a_worker_renewing_its_leases_stays_one_worker(settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 50
    alone = Worker(capacity=400)
    try:
        alone._share_endpoints()
        name = alone.name
        for _ in range(3):
            alone._leases_renewed = float("-inf")  # a renewal is due
            alone._renew_leases()
            alone._workers_said = float("-inf")
            alone._share_endpoints()
        assert alone.name == name
        assert alone.slots.per_endpoint == 50  # still counted once
    finally:
        alone.close()
