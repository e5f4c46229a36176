"""HOMING_ENDPOINT_CONCURRENCY in Redis: a cap shared by workers, slots that come back
when released or when their lease lapses, and a ramp for a recovered endpoint. Without
Redis (the embedded set-up) the same rules hold in the process: every test runs both."""

from __future__ import annotations

import time
import uuid

import pytest

from deliveries.worker import concurrency


@pytest.fixture(params=["redis", "in-process"])
def endpoint(request, settings) -> str:
    if request.param == "in-process":
        settings.REDIS_URL = ""
    return f"ep_{uuid.uuid4().hex}"


def test_it_admits_up_to_the_cap_and_a_release_frees_a_slot(endpoint, settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 3
    first = concurrency.acquire(
        endpoint_ids=[endpoint] * 2, delivery_ids=["d1", "d2"], lease_seconds=60
    )
    second = concurrency.acquire(  # another worker, same endpoint
        endpoint_ids=[endpoint, endpoint, "ep_other"],
        delivery_ids=["d3", "d4", "d5"],
        lease_seconds=60,
    )
    assert first == [True, True] and second == [True, False, True]
    concurrency.release(endpoint_id=endpoint, delivery_id="d1")
    assert concurrency.acquire(endpoint_ids=[endpoint], delivery_ids=["d4"], lease_seconds=60)


def test_a_dead_workers_slots_come_back_when_their_lease_lapses(endpoint, settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 1
    assert concurrency.acquire(endpoint_ids=[endpoint], delivery_ids=["d1"], lease_seconds=1.0)
    assert concurrency.acquire(endpoint_ids=[endpoint], delivery_ids=["d2"], lease_seconds=1) == [
        False
    ]
    time.sleep(1.1)
    assert concurrency.acquire(endpoint_ids=[endpoint], delivery_ids=["d2"], lease_seconds=1)


def test_a_recovered_endpoint_ramps_up(endpoint, settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 50
    concurrency.ramp_start(endpoint_id=endpoint)

    def admitted(n: int) -> int:
        ids = [uuid.uuid4().hex for _ in range(n)]
        verdict = concurrency.acquire(
            endpoint_ids=[endpoint] * n, delivery_ids=ids, lease_seconds=60
        )
        for delivery_id in ids:
            concurrency.release(endpoint_id=endpoint, delivery_id=delivery_id)
        return sum(verdict)

    assert admitted(10) == 2
    concurrency.ramp_grow(endpoint_ids=[endpoint])
    assert admitted(10) == 4
    for _ in range(4):
        concurrency.ramp_grow(endpoint_ids=[endpoint])
    assert admitted(60) == 50  # ramped out: the full cap


def test_room_is_what_acquire_would_admit(endpoint, settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 5
    assert concurrency.rooms(endpoint_ids=[endpoint]) == {endpoint: 5}
    concurrency.acquire(endpoint_ids=[endpoint] * 3, delivery_ids=["a", "b", "c"], lease_seconds=60)
    concurrency.ramp_start(endpoint_id=endpoint)  # a recovered endpoint: 2 at first
    assert concurrency.rooms(endpoint_ids=[endpoint, "ep_idle"]) == {endpoint: 0, "ep_idle": 5}
    concurrency.release_many(finished=[(endpoint, "a"), (endpoint, "b")])
    assert concurrency.rooms(endpoint_ids=[endpoint]) == {endpoint: 1}


def test_a_handed_over_slot_keeps_the_count_and_belongs_to_the_next_delivery(
    endpoint, settings
) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 2
    concurrency.acquire(endpoint_ids=[endpoint] * 2, delivery_ids=["d1", "d2"], lease_seconds=60)
    concurrency.hand_over(handed=[(endpoint, "d1", "d3")], lease_seconds=60)
    assert concurrency.rooms(endpoint_ids=[endpoint]) == {endpoint: 0}
    concurrency.release(endpoint_id=endpoint, delivery_id="d1")  # no longer holds one
    assert concurrency.rooms(endpoint_ids=[endpoint]) == {endpoint: 0}
    concurrency.release(endpoint_id=endpoint, delivery_id="d3")
    assert concurrency.rooms(endpoint_ids=[endpoint]) == {endpoint: 1}


def test_a_handed_over_slot_lapses_a_lease_after_the_hand_over(endpoint, settings) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 1
    concurrency.acquire(endpoint_ids=[endpoint], delivery_ids=["d1"], lease_seconds=1.0)
    time.sleep(0.6)
    concurrency.hand_over(handed=[(endpoint, "d1", "d2")], lease_seconds=1.0)
    time.sleep(0.6)  # past d1's lease, within d2's
    assert concurrency.rooms(endpoint_ids=[endpoint]) == {endpoint: 0}
    time.sleep(0.5)
    assert concurrency.rooms(endpoint_ids=[endpoint]) == {endpoint: 1}


def test_workers_sending_count_until_they_stop_or_fall_silent(redis_url) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    assert concurrency.workers_sending(worker="w1") == 1
    assert concurrency.workers_sending(worker="w2") == 2
    assert concurrency.workers_sending(worker="w1") == 2  # saying it again counts once
    assert concurrency.workers_sending(worker="w2", sending=False) == 1
    now = int(client.time()[0])  # Redis's clock, as the script's
    client.zadd(concurrency.WORKERS_KEY, {"crashed": now - 20})  # silent for 20 s
    assert concurrency.workers_sending(worker="w1", within=10) == 1


def test_without_redis_a_worker_sends_alone(settings) -> None:
    settings.REDIS_URL = ""
    assert concurrency.workers_sending(worker="w1") == 1


def test_a_renewed_place_outlives_its_first_lease_and_a_lapsed_one_stays_out(
    endpoint, settings
) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 3
    concurrency.acquire(endpoint_ids=[endpoint], delivery_ids=["lapsed"], lease_seconds=0.3)
    acquired = time.monotonic()
    concurrency.acquire(endpoint_ids=[endpoint], delivery_ids=["long"], lease_seconds=2.0)
    time.sleep(0.5)  # "lapsed" is past its lease, "long" is not (1.5 s to spare)
    concurrency.renew(held=[(endpoint, "long"), (endpoint, "lapsed")], lease_seconds=60)
    time.sleep(max(0.0, acquired + 2.3 - time.monotonic()))  # past "long"'s first lease
    assert concurrency.rooms(endpoint_ids=[endpoint])[endpoint] == 2
