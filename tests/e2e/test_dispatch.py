"""How work reaches workers: the doorbell that coalesces wake-up messages, and the
dispatcher's poll that finds due work no message announced."""

from __future__ import annotations

import time

import pytest
import redis

from deliveries.wakeups import DOORBELL_KEY
from tests.factories import delivery_of, endpoint_via_api, event_via_api
from tests.processes import wait_until

pytestmark = pytest.mark.e2e

CELERY_QUEUE = "celery"  # the default queue's Redis list


def test_a_burst_of_commits_is_announced_by_about_one_message_a_second(
    alice, transactional_db, redis_url
):
    client = redis.Redis.from_url(redis_url)
    endpoint_via_api(alice, "http://127.0.0.1:9/hook")
    started = time.monotonic()
    events = [event_via_api(alice) for _ in range(30)]
    elapsed = time.monotonic() - started
    wait_until(lambda: client.llen(CELERY_QUEUE) >= 1)
    time.sleep(0.3)  # the publisher thread is asynchronous: let it finish
    # No worker is running, so nobody lowers the doorbell: it expires once a second.
    assert 1 <= client.llen(CELERY_QUEUE) <= int(elapsed) + 2 < len(events)


def test_an_idle_worker_claims_due_work_no_message_announced(
    alice, homing, receiver_factory, redis_url
):
    receiver = receiver_factory()
    endpoint_via_api(alice, receiver.url)
    # Pretend a wake-up is already on its way: the API publishes nothing for this event.
    redis.Redis.from_url(redis_url).set(DOORBELL_KEY, 1, px=60_000)
    homing("worker")
    event = event_via_api(alice)
    [request] = receiver.wait_for(1, timeout=15)
    assert request.headers["webhook-id"] == event["id"]
    wait_until(lambda: delivery_of(event).status == "succeeded")


def test_a_worker_lowers_the_doorbell_before_it_claims(alice, homing, receiver_factory, redis_url):
    receiver = receiver_factory()
    endpoint_via_api(alice, receiver.url)
    client = redis.Redis.from_url(redis_url)
    homing("worker")
    event_via_api(alice)
    receiver.wait_for(1, timeout=30)  # the worker is up
    event = event_via_api(alice)
    assert receiver.wait_for(2, timeout=15)[1].headers["webhook-id"] == event["id"]
    # Lowered by the worker, not by its one-second expiry: the next commit rings again.
    assert not client.exists(DOORBELL_KEY)
