"""Answers that cannot be stored as they are never stop other tenants' deliveries."""

from __future__ import annotations

import collections

import pytest

from deliveries.models import Attempt, Delivery
from tests.processes import wait_until
from tests.raw_receivers import RawReceiver

pytestmark = pytest.mark.e2e

ANSWERS = {
    "/nul-body": b"HTTP/1.1 500 Oops\r\nContent-Length: 6\r\n\r\nab\x00\x00cd",
    "/nul-status": b"HTTP/1.1 503 Bad\x00Reason\r\nContent-Length: 0\r\n\r\n",
    "/long-reason": b"HTTP/1.1 500 " + b"R" * 2000 + b"\r\nContent-Length: 0\r\n\r\n",
    "/retry-after": (
        b"HTTP/1.1 429 Slow\r\nRetry-After: Wed, 21 Oct 99999999999 07:28:00 GMT\r\n"
        b"Content-Length: 0\r\n\r\n"
    ),
    "/gone": b"HTTP/1.1 410 Gone\r\nContent-Length: 3\r\n\r\n\x00\x00\x00",
}


def test_poisoned_answers_do_not_stop_another_tenants_600_events(
    alice, bob, homing, receiver_factory, settings
):
    raw = RawReceiver(lambda path: ANSWERS.get(path, ANSWERS["/nul-body"]))
    healthy = receiver_factory()
    for path in ANSWERS:
        response = alice.client.post("/api/v1/endpoints", {"url": raw.url(path)}, format="json")
        assert response.status_code == 201
    assert (
        bob.client.post("/api/v1/endpoints", {"url": healthy.url}, format="json").status_code == 201
    )
    # Every poisoned answer must reach the recorder: no circuit may open and spare it.
    homing("worker", HOMING_CIRCUIT_FAILURES="100000")
    homing("scheduler")

    for n in range(30):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    for n in range(600):
        bob.client.post("/api/v1/events", {"type": "b.c", "data": {"n": n}}, format="json")

    arrived = healthy.wait_for(600, timeout=90)
    ids = collections.Counter(r.headers.get("webhook-id") for r in arrived)
    assert len(ids) == 600 and set(ids.values()) == {1}, "every event exactly once"
    wait_until(
        lambda: Attempt.objects.filter(delivery__tenant_id=alice.tenant.id).count() >= 150,
        timeout=60,
        message="alice's poisoned attempts are recorded",
    )
    assert not Attempt.objects.filter(error="worker lost").exists()
    bodies = list(Attempt.objects.values_list("response_body", "error"))
    assert all("\x00" not in body and "\x00" not in error for body, error in bodies)
    assert all(len(error) <= 500 for _, error in bodies)
    wait_until(  # received is not yet recorded: the recorder writes a moment later
        lambda: Delivery.objects.filter(tenant_id=bob.tenant.id, status="succeeded").count() == 600,
        timeout=30,
        message="bob's 600 deliveries are recorded as succeeded",
    )
    raw.stop()
