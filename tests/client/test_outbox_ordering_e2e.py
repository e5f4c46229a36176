"""Outbox rows with an ordering key reach Homing in commit order, even with two relays."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from tests.factories import endpoint_via_api
from tests.processes import wait_until
from webhooks.models import Event

pytestmark = pytest.mark.e2e


def test_two_relays_keep_each_keys_rows_in_commit_order(
    alice, homing_api, proxy, producer, receiver_factory
):
    endpoint_via_api(alice, receiver_factory().url)
    committed: dict[str, list[str]] = {"cart-a": [], "cart-b": [], "cart-c": []}
    for n in range(45):  # one transaction each, so request order is commit order
        key = list(committed)[n % 3]
        committed[key] += producer.create_orders(ordering_key=key).json()["outbox_ids"]
    # Small batches that take a while each: the second relay claims rows 6-10 while the
    # first still sends rows 1-5, whose keys are the same.
    proxy.hold = 0.05
    producer.start_relay(proxy.url, alice.key, "--batch-size", "5")
    producer.start_relay(proxy.url, alice.key, "--batch-size", "5")

    wait_until(lambda: producer.all_sent(45), timeout=60)
    sent = list(dict.fromkeys(proxy.sent_keys()))  # the first 202 of each row, in order
    for key, rows in committed.items():
        assert [row for row in sent if row in rows] == rows, key
    # Homing took the key on: its deliveries wait in line behind each other.
    events = Event.objects.filter(ordering_key="cart-a").order_by("created_at")
    assert events.count() == 15
    lined_up = Delivery.objects.filter(event__ordering_key="cart-a").order_by("sequence")
    assert [d.event.data["order_id"] for d in lined_up] == sorted(
        d.event.data["order_id"] for d in lined_up
    )
