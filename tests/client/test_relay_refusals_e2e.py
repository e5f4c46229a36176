"""The relay against answers that are not about one row: a real Homing's 429
(backpressure), a row Homing keeps answering 500, and an outage answering 503."""

from __future__ import annotations

import time

import pytest

from deliveries.intake.backpressure import tenant_limits_set
from tests.processes import wait_until
from webhooks.models import Event

pytestmark = pytest.mark.e2e


def statuses(producer) -> list[str]:
    return [row["status"] for row in producer.rows()]


def test_a_429_keeps_the_rows_pending_until_homing_takes_them(alice, homing_api, proxy, producer):
    tenant_limits_set(tenant=alice.tenant, event_rate=2, max_backlog=None)
    outbox_ids = producer.create_orders(count=6).json()["outbox_ids"]
    started = time.monotonic()
    producer.start_relay(proxy.url, alice.key, HOMING_RELAY_RETRY_FOR="5")

    wait_until(lambda: statuses(producer) == ["sent"] * 6, timeout=30)
    # 2 a second: the relay was held back and waited, it did not give up on any row.
    assert time.monotonic() - started >= 2
    assert {f.status for f in proxy.forwarded} == {202, 429}  # refused, waited, sent
    assert proxy.sent_keys() == outbox_ids  # in order of creation, each once
    assert Event.objects.filter(tenant=alice.tenant).count() == 6


def test_a_row_homing_keeps_answering_500_is_failed_and_the_next_rows_go_on(
    alice, homing_api, proxy, producer
):
    first, poison, third = producer.create_orders(count=3).json()["outbox_ids"]
    proxy.fail_keys[poison] = 500  # Homing has a bug this row triggers; /healthz is fine
    producer.start_relay(proxy.url, alice.key, HOMING_RELAY_RETRY_FOR="1")

    wait_until(lambda: "pending" not in statuses(producer), timeout=30)
    rows = {row["id"]: row for row in producer.rows()}
    assert rows[poison]["status"] == "failed"
    assert rows[poison]["last_error"].startswith("HTTP 500: "), rows[poison]["last_error"]
    assert "/healthz answered 200" in rows[poison]["last_error"]
    assert rows[first]["status"] == rows[third]["status"] == "sent"
    assert proxy.sent_keys() == [first, third]
    # The row got 500s for the client's whole retry_for (1 s), then was given up.
    assert sum(f.key == poison for f in proxy.forwarded) >= 2


def test_an_outage_answering_503_fails_no_row(alice, homing_api, proxy, producer):
    proxy.outage = 503  # every POST and /healthz too: Homing is down, not the row
    outbox_ids = producer.create_orders(count=3).json()["outbox_ids"]
    producer.start_relay(proxy.url, alice.key, HOMING_RELAY_RETRY_FOR="1")

    wait_until(lambda: producer.rows()[0]["attempts"] >= 3, timeout=30)
    assert statuses(producer) == ["pending"] * 3
    assert producer.rows()[0]["last_error"].startswith("HTTP 503: ")

    proxy.outage = None
    wait_until(lambda: statuses(producer) == ["sent"] * 3, timeout=30)
    assert proxy.sent_keys() == outbox_ids
