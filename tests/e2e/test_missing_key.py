"""A worker that cannot decrypt an endpoint's secret sends nothing and kills nothing:
the deliveries wait with their attempts unspent until a worker with the key sends them."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook

from deliveries.models import Delivery
from tests.factories import endpoint_via_api, event_via_api
from tests.processes import wait_until

pytestmark = pytest.mark.e2e


def test_a_worker_without_the_key_leaves_deliveries_waiting_for_one_with_it(
    alice, homing, receiver_factory, settings
):
    settings.HOMING_RETRY_SCHEDULE = "1s,1s,1s"
    receiver = receiver_factory()
    endpoint = endpoint_via_api(alice, receiver.url)  # encrypted with the test's own key
    keyless = homing("worker", HOMING_ENCRYPTION_KEY="a key that never encrypted anything")
    events = [event_via_api(alice) for _ in range(3)]
    ids = [event["deliveries"][0]["id"] for event in events]

    def waiting() -> list[Delivery]:
        return list(Delivery.objects.filter(pk__in=ids, last_error__contains="ENCRYPTION_KEY"))

    wait_until(lambda: len(waiting()) == 3, timeout=20, message="the keyless worker gave none back")
    time.sleep(2)  # long enough for three retries, were attempts being spent
    for delivery in Delivery.objects.filter(pk__in=ids):
        assert (delivery.status, delivery.attempt_count) == ("pending", 0)
        assert "HOMING_ENCRYPTION_KEY lacks the key" in delivery.last_error
        assert delivery.next_attempt_at is not None
        assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=20)  # no spinning
    assert receiver.requests == []
    logged = [line for line in keyless.log().splitlines() if "cannot decrypt" in line]
    assert logged and all("ERROR" in line for line in logged)
    assert {delivery_id for delivery_id in ids if any(delivery_id in x for x in logged)} == set(ids)
    keyless.stop()

    # The key is back (the default: derived from SECRET_KEY, as in this test process);
    # the wait is cut short here so the test does not sit out the back-off.
    Delivery.objects.filter(pk__in=ids).update(next_attempt_at=Now())
    homing("worker", HOMING_ENCRYPTION_KEY="")
    requests = receiver.wait_for(3, timeout=20)
    assert sorted(r.headers["webhook-id"] for r in requests) == sorted(e["id"] for e in events)
    for request in requests:
        StandardWebhook(endpoint["secret"]).verify(request.body, request.headers)
    wait_until(
        lambda: all(
            (d.status, d.attempt_count) == ("succeeded", 1)
            for d in Delivery.objects.filter(pk__in=ids)
        )
    )
