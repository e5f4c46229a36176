"""SIGTERM lets attempts under way finish and be recorded (a deploy loses nothing)."""

from __future__ import annotations

import pytest

from deliveries.models import Attempt, Delivery
from tests.receivers import Answer

pytestmark = pytest.mark.e2e


def test_sigterm_records_the_attempts_under_way(alice, homing, receiver_factory):
    receiver = receiver_factory(lambda r, n: Answer(delay=2.0))
    assert (
        alice.client.post("/api/v1/endpoints", {"url": receiver.url}, format="json").status_code
        == 201
    )
    worker = homing("worker")
    for n in range(10):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    receiver.wait_for(1, timeout=30)  # attempts are in flight in the slow receiver
    assert Delivery.objects.filter(status="delivering").exists()

    worker.stop()  # SIGTERM to the process group, as honcho or a deploy does

    assert not Delivery.objects.filter(status="delivering").exists()
    assert not Attempt.objects.filter(error="worker lost").exists()
    assert Attempt.objects.filter(status_code=200).count() == len(receiver.requests)
    assert worker.popen.returncode is not None
