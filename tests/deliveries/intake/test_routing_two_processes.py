"""Two real web processes, each with its own routing cache: a change made through one is
obeyed by the other on the very next event (never a delivery to a deactivated or deleted
endpoint, never a missed delivery to a new one)."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from tests.factories import endpoint_id_via_web
from tests.processes import Web

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


def _post_event(web: Web, key: str) -> list[str]:
    """Endpoint ids the event went to, as the 202 says and as the database holds."""
    status, body = web.call(
        "POST", "/api/v1/events", key=key, body={"type": "order.paid", "data": {}}
    )
    assert status == 202, body
    answered = sorted(d["endpoint_id"] for d in body["deliveries"])
    stored = sorted(
        Delivery.objects.filter(event_id=body["id"]).values_list("endpoint_id", flat=True)
    )
    assert answered == stored
    return stored


def test_a_change_through_one_process_is_obeyed_by_the_other_at_once(alice, webs):
    a, b = webs
    shop, audit = endpoint_id_via_web(a, alice.key), endpoint_id_via_web(a, alice.key)
    both = sorted([shop, audit])
    assert _post_event(a, alice.key) == _post_event(b, alice.key) == both  # caches warm

    assert (
        a.call("PATCH", f"/api/v1/endpoints/{shop}", key=alice.key, body={"is_active": False})[0]
        == 200
    )
    assert _post_event(b, alice.key) == [audit]

    assert a.call("DELETE", f"/api/v1/endpoints/{audit}", key=alice.key)[0] == 204
    assert _post_event(b, alice.key) == []
    assert _post_event(a, alice.key) == []

    fresh = endpoint_id_via_web(b, alice.key)
    assert _post_event(a, alice.key) == [fresh]

    narrowed = {"event_types": ["invoice.*"]}
    assert b.call("PATCH", f"/api/v1/endpoints/{fresh}", key=alice.key, body=narrowed)[0] == 200
    assert _post_event(a, alice.key) == []

    assert (
        b.call("PATCH", f"/api/v1/endpoints/{shop}", key=alice.key, body={"is_active": True})[0]
        == 200
    )
    assert _post_event(a, alice.key) == [shop]
