"""Two real web processes share one tenant's event-rate window through Redis: posting to
both at once admits the rate, not the rate twice."""

from __future__ import annotations

import math
import time

import pytest

from deliveries.intake.backpressure import tenant_limits_set
from tests.processes import Web
from webhooks.models import Event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


@pytest.fixture
def webs(tmp_path):
    started = []
    try:
        started.append(Web(tmp_path, "web-a"))
        started.append(Web(tmp_path, "web-b"))
        yield started
    finally:
        for web in started:
            web.process.stop()


def test_the_rate_holds_across_web_processes(alice, bob, webs):
    a, b = webs
    tenant_limits_set(tenant=alice.tenant, event_rate=4, max_backlog=None)
    event = {"type": "order.paid", "data": {}}

    started = time.monotonic()
    answers = [web.call("POST", "/api/v1/events", key=alice.key, body=event) for web in [a, b] * 5]
    elapsed = time.monotonic() - started
    statuses = [status for status, _ in answers]
    if elapsed < 1.0:  # all ten inside one window
        assert statuses.count(202) == 4 and statuses.count(429) == 6, statuses
    else:  # a loaded machine: still no more than the rate in any second
        assert 4 <= statuses.count(202) <= 4 * math.ceil(elapsed + 1), (statuses, elapsed)
    refused = next(body for status, body in answers if status == 429)
    assert refused["code"] == "rate_limited"
    assert Event.objects.filter(tenant=alice.tenant).count() == statuses.count(202)

    # bob has no limit of his own and the setting has none: both processes take his.
    assert [b.call("POST", "/api/v1/events", key=bob.key, body=event)[0] for _ in range(6)] == [
        202
    ] * 6
