"""The Worker gives every slot back, whatever happens to an attempt."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from deliveries.policy import current_policy
from deliveries.worker import Worker


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
    delivery = SimpleNamespace(id="dlv_1", endpoint_id="ep_1")
    worker.slots.admit(["ep_1"], worker.slots.reserve(1))

    async def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(worker, "_send", broken)
    with pytest.raises(RuntimeError):
        run(worker, worker._attempt(delivery, current_policy()))
    assert worker.slots.in_flight == 0


def test_a_slot_is_released_once_the_result_is_recorded(worker, monkeypatch) -> None:
    delivery = SimpleNamespace(id="dlv_1", endpoint_id="ep_1")
    worker.slots.admit(["ep_1"], worker.slots.reserve(1))
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
    delivery = SimpleNamespace(id="dlv_1", endpoint_id="ep_1")
    worker.slots.admit(["ep_1"], worker.slots.reserve(1))
    monkeypatch.setattr(worker.recorder, "submit", lambda o, done: None)

    async def answered(*args):
        return None

    monkeypatch.setattr(worker, "_send", answered)
    run(worker, worker._attempt(delivery, current_policy()))
    assert worker.slots.room("ep_1") == worker.slots.per_endpoint  # the receiver is free
    assert worker.slots.in_flight == 1  # the result is not recorded yet
