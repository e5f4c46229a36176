"""Ordering keys end to end: real workers, a real receiver that keeps a log per key."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.factories import endpoint_via_api
from tests.processes import wait_until
from tests.receivers import Answer

pytestmark = pytest.mark.e2e


@dataclass
class KeyLog:
    """What one receiver saw, per ordering key: each request's event number as it
    arrived, those it answered 2xx, and the most requests of the key open at once."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    succeeded: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    open_now: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    most_open: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    overtaken: list[str] = field(default_factory=list)

    def behaviour(self, fails, hold=0.01):
        def answer(request, n):
            data = json.loads(request.body)["data"]
            key, number = data["k"], data["n"]
            with self.lock:
                self.arrived[key].append(number)
                # Every earlier event of the key must have been answered 2xx already.
                if set(range(number)) - set(self.succeeded[key]):
                    self.overtaken.append(f"{key}: {number} before {sorted(self.succeeded[key])}")
                self.open_now[key] += 1
                self.most_open[key] = max(self.most_open[key], self.open_now[key])
            time.sleep(hold)  # the request stays open a moment: overlaps would show
            failed = fails(key, number)
            with self.lock:
                self.open_now[key] -= 1
                if not failed:
                    self.succeeded[key].append(number)
            return Answer(503) if failed else Answer(200)

        return answer


def post_keyed(actor, key: str, n: int):
    body = {"type": "order.updated", "data": {"k": key, "n": n}, "ordering_key": key}
    response = actor.client.post("/api/v1/events", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def test_forty_keys_arrive_in_order_one_at_a_time_through_random_failures(
    alice, homing, receiver_factory, settings
):
    settings.HOMING_RETRY_SCHEDULE = ",".join(["100ms"] * 20)
    rng, rng_lock = random.Random(1525), threading.Lock()

    def fails(key, number):
        with rng_lock:
            return rng.random() < 0.3

    log = KeyLog()
    receiver = receiver_factory(log.behaviour(fails))
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    keys, per_key = [f"order-{i}" for i in range(40)], 15
    for n in range(per_key):
        for key in keys:
            post_keyed(alice, key, n)

    wait_until(
        lambda: Delivery.objects.filter(status="succeeded").count() == len(keys) * per_key,
        timeout=120,
        message="not every delivery succeeded",
    )
    assert log.overtaken == []
    for key in keys:
        assert log.succeeded[key] == list(range(per_key)), key
        assert log.most_open[key] == 1, key
    assert sum(len(v) for v in log.arrived.values()) > len(keys) * per_key  # retries happened


# Long enough that the flowing key's five deliveries finish well inside it on a machine
# loaded to 8 on 2 cores (a 3 s block ran out first there); the test waits on what the
# receiver and the rows show, and compares no wall-clock time of its own.
MAX_BLOCK = 20


def test_a_key_whose_first_always_fails_holds_back_only_itself_then_moves_on(
    alice, homing, receiver_factory, settings
):
    settings.HOMING_RETRY_SCHEDULE = ",".join(["500ms"] * 120)  # retries outlast the block
    log = KeyLog()
    receiver = receiver_factory(log.behaviour(lambda key, n: key == "stuck" and n == 0))
    endpoint_via_api(alice, receiver.url)
    homing("worker", HOMING_ORDERING_MAX_BLOCK=f"{MAX_BLOCK}s")
    homing("scheduler", HOMING_ORDERING_MAX_BLOCK=f"{MAX_BLOCK}s")
    stuck_head = post_keyed(alice, "stuck", 0)
    post_keyed(alice, "flowing", 0)
    for n in range(1, 5):
        post_keyed(alice, "stuck", n)
        post_keyed(alice, "flowing", n)

    wait_until(lambda: log.succeeded["flowing"] == list(range(5)), timeout=MAX_BLOCK * 3)
    # The other key did not wait for the stuck one: its head is still being retried.
    assert not DeadLetter.objects.exists()
    assert log.arrived["stuck"] and set(log.arrived["stuck"]) == {0}  # only its head, so far

    wait_until(lambda: log.succeeded["stuck"] == [1, 2, 3, 4], timeout=MAX_BLOCK * 6)
    [letter] = DeadLetter.objects.all()
    assert letter.reason == f"blocked its ordering key for {MAX_BLOCK}s"
    # Not before the max block: it counts from when the head joined its line.
    head = Delivery.objects.get(pk=stuck_head["deliveries"][0]["id"])
    assert letter.delivery_id == head.pk
    assert (letter.dead_at - head.created_at).total_seconds() >= MAX_BLOCK
    # The dead head let the rest of its key go on, in order.
    assert log.overtaken == [f"stuck: {n} before {list(range(1, n))}" for n in range(1, 5)]


def test_kill_9_of_a_worker_mid_run_never_reorders_a_key(alice, homing, receiver_factory, settings):
    settings.HOMING_DELIVERY_TIMEOUT = 2  # leases of the killed worker end ~17 s later
    log = KeyLog()
    receiver = receiver_factory(log.behaviour(lambda key, n: False, hold=0.05))
    endpoint_via_api(alice, receiver.url)
    doomed = homing("worker", name="doomed")
    homing("scheduler")
    keys, per_key = [f"cart-{i}" for i in range(20)], 10
    for n in range(per_key):
        for key in keys:
            post_keyed(alice, key, n)

    wait_until(lambda: sum(len(v) for v in log.succeeded.values()) >= 40, timeout=30)
    doomed.kill_hard()
    homing("worker", name="survivor")

    wait_until(
        lambda: Delivery.objects.filter(status="succeeded").count() == len(keys) * per_key,
        timeout=90,
        message="not every delivery succeeded after the kill",
    )
    assert log.overtaken == []
    for key in keys:
        # A head may have been sent twice (its attempt died with the worker); in order.
        firsts = list(dict.fromkeys(log.succeeded[key]))
        assert firsts == list(range(per_key)), key


def test_a_batchs_events_of_one_key_arrive_in_batch_order(alice, homing, receiver_factory):
    log = KeyLog()
    receiver = receiver_factory(log.behaviour(lambda key, n: False))
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    events = [
        {"type": "order.updated", "data": {"k": key, "n": n}, "ordering_key": key}
        for n in range(12)
        for key in ("batch-a", "batch-b")
    ]
    response = alice.client.post("/api/v1/events/batch", {"events": events}, format="json")
    assert response.status_code == 202

    wait_until(lambda: len(log.succeeded["batch-a"]) + len(log.succeeded["batch-b"]) == 24)
    assert log.succeeded["batch-a"] == log.succeeded["batch-b"] == list(range(12))
    assert log.overtaken == [] and log.most_open["batch-a"] == 1
