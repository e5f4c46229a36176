"""A hanging endpoint must not hold back deliveries to other endpoints."""

from __future__ import annotations

import collections
import time

import pytest

from deliveries.models import Delivery
from deliveries.worker.planner import endpoint_cap
from tests.processes import wait_until
from tests.receivers import Answer

pytestmark = pytest.mark.e2e


def test_a_hanging_endpoint_does_not_delay_a_healthy_one(alice, homing, receiver_factory, settings):
    settings.HOMING_DELIVERY_TIMEOUT = 4
    hanging = receiver_factory(lambda r, n: Answer(delay=6))
    healthy = receiver_factory()
    for url, types in ((hanging.url, ["slow.*"]), (healthy.url, ["fast.*"])):
        response = alice.client.post(
            "/api/v1/endpoints", {"url": url, "event_types": types}, format="json"
        )
        assert response.status_code == 201
    homing("worker", concurrency=4)
    homing("scheduler")

    for n in range(80):
        alice.client.post("/api/v1/events", {"type": "slow.x", "data": {"n": n}}, format="json")
    hanging.wait_for(1)
    posted = time.time()
    for n in range(20):
        alice.client.post("/api/v1/events", {"type": "fast.x", "data": {"n": n}}, format="json")

    arrived = healthy.wait_for(20, timeout=30)
    latest = max(r.at for r in arrived) - posted
    assert latest < 2.0, f"healthy deliveries waited {latest:.1f}s behind the hanging endpoint"
    in_flight = Delivery.objects.filter(endpoint__url=hanging.url, status="delivering").count()
    assert in_flight <= endpoint_cap(
        capacity=settings.HOMING_SEND_CONCURRENCY, cluster_cap=settings.HOMING_ENDPOINT_CONCURRENCY
    )
    wait_until(
        lambda: Delivery.objects.filter(endpoint__url=healthy.url, status="succeeded").count() == 20
    )


def test_a_hanging_endpoint_does_not_delay_a_healthy_one_on_the_same_host_and_port(
    alice, homing, receiver_factory, settings
):
    settings.HOMING_DELIVERY_TIMEOUT = 4
    shared = receiver_factory(lambda r, n: Answer(delay=6) if "/slow" in r.path else Answer())
    base = shared.url.rsplit("/", 1)[0]
    for path, types in (("slow", ["slow.*"]), ("fast", ["fast.*"])):
        response = alice.client.post(
            "/api/v1/endpoints", {"url": f"{base}/{path}", "event_types": types}, format="json"
        )
        assert response.status_code == 201
    homing("worker", concurrency=4)
    homing("scheduler")

    for n in range(80):  # more than the worker's connections per host used to be
        alice.client.post("/api/v1/events", {"type": "slow.x", "data": {"n": n}}, format="json")
    wait_until(lambda: any("/slow" in r.path for r in shared.requests))
    posted = time.time()
    for n in range(20):
        alice.client.post("/api/v1/events", {"type": "fast.x", "data": {"n": n}}, format="json")

    def fast() -> list[float]:
        return [r.at for r in shared.requests if r.path.endswith("/fast")]

    wait_until(lambda: len(fast()) >= 20, timeout=30)
    latest = max(fast()) - posted
    assert latest < 2.0, f"healthy deliveries waited {latest:.1f}s behind the hanging endpoint"


def test_rate_limit_caps_attempts_per_second(alice, homing, receiver_factory):
    receiver = receiver_factory()
    response = alice.client.post(
        "/api/v1/endpoints", {"url": receiver.url, "rate_limit": 2}, format="json"
    )
    assert response.status_code == 201
    homing("worker")
    homing("scheduler")
    for n in range(10):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")

    arrived = receiver.wait_for(10, timeout=30)
    per_second = collections.Counter(int(r.at) for r in arrived)
    # The worker counts by its clock when it sends; allow one that lands a moment later.
    assert max(per_second.values()) <= 3, per_second
    # 10 at 2 a second need 5 distinct seconds: the first and last are over 3 s apart.
    assert arrived[-1].at - arrived[0].at > 2.9
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 10)
    assert Delivery.objects.filter(attempt_count=1).count() == 10  # waits cost no attempt
