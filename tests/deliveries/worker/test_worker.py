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


@pytest.mark.parametrize("capacity", [2, 10, 100, 400, 1000])
def test_one_claim_can_never_take_an_endpoint_past_its_cap(capacity: int) -> None:
    worker = Worker(capacity=capacity)
    try:
        slots = worker.slots
        # Fill the endpoint to the fullest it can be while claims still take it...
        fullest_claimable = slots.per_endpoint - worker._batch - 1
        if fullest_claimable > 0:
            filled = slots.reserve(fullest_claimable)
            assert all(slots.admit(["ep"] * filled, filled))
        assert "ep" not in slots.busy()
        # ...then one whole batch for it still fits: nothing is given back.
        reserved = slots.reserve(worker._batch)
        assert all(slots.admit(["ep"] * reserved, reserved))
        # One more in flight and claims skip it.
        if slots.reserve(1, timeout=0):
            slots.admit(["ep"], 1)
        assert "ep" in slots.busy()
    finally:
        worker.close()
