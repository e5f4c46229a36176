"""A worker process whose thread dies or hangs exits, and `run_worker` starts a new one:
it never stays up holding leases and sending nothing. Each of its threads is broken in
turn, in a real worker under load (tests/faults/sitecustomize.py); every delivery
arrives, and only those the dead process had sent (in flight, or answered but not yet
recorded) arrive twice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from deliveries.models import Delivery
from deliveries.worker.supervisor import EXIT_CODE
from tests.factories import endpoint_via_api, event_via_api
from tests.processes import wait_until
from tests.receivers import Answer

pytestmark = pytest.mark.e2e

FAULTS = Path(__file__).resolve().parent.parent / "faults"
COUNT = 20
ENV = {
    # Four at a time, half a second each: a queue the fault lands in the middle of.
    "HOMING_ENDPOINT_CONCURRENCY": "4",
    "HOMING_DELIVERY_TIMEOUT": "2",  # leases of 17 s: the dead process's come back soon
    "HOMING_RETRY_SCHEDULE": "1s,1s,1s,1s,1s",
    "HOMING_RETRY_JITTER": "0",
}


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("claims", "the claims thread died"),
        ("event loop", "the event loop thread died"),
        ("event loop stuck", "the event loop has not answered"),
        ("recorder", "the recorder thread died"),
        ("releases", "the releases thread died"),
        ("parker", "the parker thread died"),
        ("publisher", "the homing-publisher thread died"),
        ("counters", "the homing-counters thread died"),
    ],
)
def test_a_worker_whose_thread_fails_exits_and_its_deliveries_arrive(
    fault, reason, alice, homing, receiver_factory, tmp_path
):
    receiver = receiver_factory(lambda request, n: Answer(delay=0.5))
    endpoint_via_api(alice, receiver.url)
    trigger = tmp_path / "fault"
    worker = homing(
        "worker",
        PYTHONPATH=str(FAULTS),
        HOMING_TEST_FAULT=fault,
        HOMING_TEST_FAULT_TRIGGER=str(trigger),
        **ENV,
    )
    homing("scheduler", **ENV)
    events = [event_via_api(alice) for _ in range(COUNT)]
    receiver.wait_for(4, timeout=30)
    trigger.touch()

    wait_until(
        lambda: f"worker exited with {EXIT_CODE}" in worker.log(),
        timeout=30,
        message=f"the worker did not exit after the {fault} fault",
    )
    exited_at = time.time()
    assert reason in worker.log()
    assert not trigger.exists()  # the fault fired (once)

    ids = {event["deliveries"][0]["id"] for event in events}
    wait_until(
        lambda: Delivery.objects.filter(pk__in=ids, status="succeeded").count() == COUNT,
        timeout=90,
        message="not every delivery arrived after the restart",
    )
    sent = [r.headers["webhook-id"] for r in receiver.requests]
    assert set(sent) == {event["id"] for event in events}
    first_sent: dict[str, float] = {}
    for request in receiver.requests:
        first_sent.setdefault(request.headers["webhook-id"], request.at)
    twice = {webhook_id for webhook_id in sent if sent.count(webhook_id) > 1}
    # Only what the dead process had sent already is sent again.
    assert all(first_sent[webhook_id] < exited_at for webhook_id in twice)
