"""HOMING_ENDPOINT_CONCURRENCY holds across worker processes: against a slow endpoint,
two workers together never have more than the cap in flight to it."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from tests.backlogs import due_backlog
from tests.processes import wait_until
from tests.receivers import Answer, most_at_once
from webhooks.services.endpoints import endpoint_create
from webhooks.services.tenants import tenant_create

pytestmark = pytest.mark.e2e

SLOW = 0.4  # seconds the receiver takes to answer


def test_the_cap_holds_across_two_workers(homing, receiver_factory):
    tenant, _ = tenant_create(name="Slow")
    receiver = receiver_factory(lambda request, n: Answer(delay=SLOW))
    endpoint = endpoint_create(tenant=tenant, url=receiver.url)
    env = {"HOMING_ENDPOINT_CONCURRENCY": "4", "HOMING_SEND_CONCURRENCY": "40"}
    homing("worker", **env)
    homing("worker", **env)
    due_backlog(tenant, endpoint, 40)
    homing("scheduler", **env)
    starts = [r.at for r in receiver.wait_for(40, timeout=30)]
    # Measured at the receiver: each request holds a connection SLOW seconds from its
    # arrival (minus a little, as the answer leaves just before the next may arrive).
    assert most_at_once(starts, SLOW - 0.05) <= 4
    assert most_at_once(starts, SLOW - 0.05) >= 3  # and the cap is used, not starved
    wait_until(
        lambda: Delivery.objects.filter(status="succeeded").count() == 40,
        timeout=10,
        message="not every delivery was recorded",
    )
