"""At least once through crashes, exactly once without them."""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import time

import pytest
import redis

from deliveries.models import Delivery
from tests.factories import endpoint_id_via_api
from tests.harness import redis_command
from tests.processes import wait_until
from tests.receivers import Answer

pytestmark = pytest.mark.e2e


def send_events(actor, count):
    ids = []
    for n in range(count):
        response = actor.client.post(
            "/api/v1/events", {"type": "order.paid", "data": {"n": n}}, format="json"
        )
        assert response.status_code == 202
        ids.append(response.json()["id"])
    return ids


def all_succeeded(expected: int) -> bool:
    return Delivery.objects.filter(status="succeeded").count() == expected


def test_a_thousand_events_arrive_exactly_once_with_two_workers_and_two_schedulers(
    alice, homing, receiver_factory
):
    receiver = receiver_factory()
    endpoint_id_via_api(alice, receiver.url)
    for _ in range(2):
        homing("worker")
        homing("scheduler")
    event_ids = send_events(alice, 1000)

    receiver.wait_for(1000, timeout=120)
    wait_until(lambda: all_succeeded(1000), timeout=60)
    time.sleep(1)  # anything sent twice would have arrived by now
    seen = collections.Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert set(seen) == set(event_ids)
    assert [i for i, n in seen.items() if n > 1] == []


def test_a_worker_killed_mid_attempt_loses_nothing(alice, homing, receiver_factory, settings):
    settings.HOMING_DELIVERY_TIMEOUT = 5  # lease = timeout + 15 s
    slow_until = time.time() + 3
    receiver = receiver_factory(lambda r, n: Answer(delay=2.0 if time.time() < slow_until else 0))
    endpoint_id_via_api(alice, receiver.url)
    worker = homing("worker")
    homing("scheduler")
    event_ids = send_events(alice, 20)
    receiver.wait_for(1)  # attempts are in flight, stuck in the slow receiver
    worker.kill_hard()
    in_flight = Delivery.objects.filter(status="delivering").count()
    assert in_flight > 0

    restarted = time.monotonic()
    homing("worker")
    wait_until(lambda: all_succeeded(20), timeout=60, message="not every delivery recovered")
    assert time.monotonic() - restarted < 60
    delivered = {r.headers["webhook-id"] for r in receiver.requests}
    assert delivered == set(event_ids)
    lost = Delivery.objects.filter(attempts__error="worker lost").distinct().count()
    assert lost == in_flight


def _start_redis(redis_url: str) -> subprocess.Popen[bytes]:
    """A fresh, empty Redis on the suite's port (tests/harness.py started the first)."""
    port = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs["port"]
    server = subprocess.Popen(
        redis_command(os.environ["HOMING_TEST_REDIS_SERVER"], port),
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_until(lambda: _pings(redis_url), timeout=10)
    return server


def _stop_redis(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    with contextlib.suppress(redis.ConnectionError):
        client.shutdown(nosave=True)
    wait_until(lambda: not _pings(redis_url), timeout=10)


def _pings(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url).ping())
    except redis.ConnectionError:
        return False


# Stops the suite's Redis: run alone, after the parallel pass (tests/harness.py).
@pytest.mark.serial
def test_redis_restarted_empty_loses_nothing(alice, homing, receiver_factory, redis_url):
    receiver = receiver_factory(lambda r, n: Answer(delay=0.5))
    endpoint_id_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    first = send_events(alice, 30)
    receiver.wait_for(1)
    _stop_redis(redis_url)  # queued messages are gone with it
    time.sleep(1)
    _start_redis(redis_url)  # left running for the rest of the suite
    second = send_events(alice, 10)
    wait_until(
        lambda: all_succeeded(40), timeout=120, message="deliveries lost with Redis's messages"
    )
    assert {r.headers["webhook-id"] for r in receiver.requests} == set(first + second)


def _pg_ctl(action: str) -> None:
    args = [
        os.path.join(os.environ["HOMING_TEST_PG_BIN"], "pg_ctl"),
        "-D",
        os.environ["HOMING_TEST_PGDATA"],
        "-l",
        os.environ["HOMING_TEST_PG_LOG"],
        "-w",
    ]
    if action == "stop":
        args += ["-m", "fast"]
    subprocess.run(
        [*args, action],
        check=True,
        user=os.environ["HOMING_TEST_PG_USER"] or None,
        stdout=subprocess.DEVNULL,
    )


# Stops the suite's PostgreSQL: run alone, after the parallel pass (tests/harness.py).
@pytest.mark.serial
def test_postgres_restarted_mid_run_loses_nothing(alice, homing, receiver_factory):
    from django.db import connection

    receiver = receiver_factory(lambda r, n: Answer(delay=0.2))
    endpoint_id_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event_ids = send_events(alice, 30)
    receiver.wait_for(3)
    connection.close()
    _pg_ctl("stop")
    time.sleep(2)
    _pg_ctl("start")

    wait_until(lambda: all_succeeded(30), timeout=90, message="deliveries stuck after restart")
    assert {r.headers["webhook-id"] for r in receiver.requests} == set(event_ids)
