"""Sequences on the wire: what receivers see as `homing-sequence`."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connections

from deliveries.intake.ingest import event_ingest
from deliveries.models import Delivery
from tests.factories import delivery_of, endpoint_via_api, event_via_api
from tests.processes import wait_until
from tests.receivers import Answer

pytestmark = pytest.mark.e2e


def test_concurrent_producers_give_each_endpoint_one_to_n_on_the_wire(
    alice, homing, receiver_factory
):
    receivers = [receiver_factory(), receiver_factory()]
    endpoints = [endpoint_via_api(alice, receiver.url)["id"] for receiver in receivers]
    homing("worker")
    producers, per_producer = 8, 25

    def produce() -> None:
        try:
            for n in range(per_producer):
                event_ingest(tenant=alice.tenant, event_type="order.paid", data={"n": n})
        finally:
            connections.close_all()

    threads = [threading.Thread(target=produce) for _ in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    total = producers * per_producer
    for receiver, endpoint in zip(receivers, endpoints, strict=True):
        requests = receiver.wait_for(total)
        numbers = Counter(int(r.headers["homing-sequence"]) for r in requests)
        assert sorted(numbers) == list(range(1, total + 1))
        assert max(numbers.values()) == 1  # no number twice
        # Each webhook carries its own delivery's number.
        by_event = dict(
            Delivery.objects.filter(endpoint_id=endpoint).values_list("event_id", "sequence")
        )
        assert all(
            by_event[r.headers["webhook-id"]] == int(r.headers["homing-sequence"]) for r in requests
        )


def test_retries_keep_their_sequence(alice, homing, receiver_factory, settings):
    settings.HOMING_RETRY_SCHEDULE = "1s,1s,1s"
    tries: Counter[str] = Counter()

    def fail_twice(request, n):
        tries[request.headers["webhook-id"]] += 1
        return Answer(503) if tries[request.headers["webhook-id"]] <= 2 else Answer(200)

    receiver = receiver_factory(fail_twice)
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    homing("scheduler")
    event_via_api(alice)
    event = event_via_api(alice)
    wait_until(lambda: delivery_of(event).status == "succeeded", timeout=30)
    sent = [
        r.headers["homing-sequence"]
        for r in receiver.requests
        if r.headers["webhook-id"] == event["id"]
    ]
    assert sent == ["2", "2", "2"]
