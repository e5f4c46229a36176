"""The Django outbox against a real Homing: producer app, relay and Homing are processes.

The producer app (tests/client/producer_app) publishes with publish_on_commit inside
transaction.atomic() on its own database; `manage.py homing_relay` sends the rows
through a recording proxy to Homing's API under gunicorn; Celery workers deliver.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from homing_client import Client

from tests.client.stack import PRODUCER_SETTINGS, port_is_closed
from tests.factories import endpoint_via_api
from tests.processes import ROOT, process_env, wait_until
from webhooks.models import Event

pytestmark = pytest.mark.e2e


def test_it_sends_a_committed_event_once_and_nothing_for_a_rolled_back_one(
    alice, homing, homing_api, proxy, producer, receiver_factory
):
    receiver = receiver_factory()
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    producer.start_relay(proxy.url, alice.key)

    rolled_back = producer.create_orders(amount=13, fail=True)
    assert rolled_back.status_code == 409
    committed = producer.create_orders(amount=42)
    assert committed.status_code == 201
    (outbox_id,) = committed.json()["outbox_ids"]

    (webhook,) = receiver.wait_for(1, timeout=30)
    wait_until(lambda: producer.all_sent(1), timeout=10)
    (row,) = producer.rows()
    assert row["id"] == outbox_id and row["id"] not in rolled_back.json()["rolled_back"]
    assert json.loads(webhook.body)["data"] == {"order_id": producer.orders()[0], "amount": 42}
    assert webhook.headers["webhook-id"] == row["event_id"]
    time.sleep(1.5)  # a second webhook or event would have shown up by now
    assert len(receiver.requests) == 1
    assert list(Event.objects.values_list("id", flat=True)) == [row["event_id"]]
    assert proxy.sent_keys() == [outbox_id]
    assert producer.orders() == [2]  # order 1 rolled back, with its outbox row


def test_unserializable_data_fails_in_the_caller_and_writes_nothing(producer):
    response = producer.create_orders(unserializable=True)

    assert response.status_code == 400
    assert response.json() == {"error": "TypeError: Object of type set is not JSON serializable"}
    assert producer.rows() == [] and producer.orders() == []


def test_rows_homing_refuses_are_kept_as_failed_and_the_relay_carries_on(
    alice, homing_api, proxy, producer
):
    too_big = producer.create_orders(big=True).json()["outbox_ids"][0]
    collided = producer.create_orders(amount=5).json()["outbox_ids"][0]
    accepted = producer.create_orders(amount=7).json()["outbox_ids"][0]
    # Someone already used the second row's id as a key, with another body: Homing says 422.
    other = Client(homing_api.url, alice.key).publish("other.thing", {}, idempotency_key=collided)
    producer.start_relay(proxy.url, alice.key)

    wait_until(lambda: all(row["status"] != "pending" for row in producer.rows()), timeout=20)
    rows = {row["id"]: row for row in producer.rows()}
    assert rows[too_big]["status"] == "failed"
    assert rows[too_big]["last_error"].startswith("HTTP 413: "), rows[too_big]["last_error"]
    assert rows[too_big]["data"]["order_id"]  # kept, to inspect or send again from the admin
    assert rows[collided]["status"] == "failed"
    assert rows[collided]["last_error"].startswith("HTTP 422: "), rows[collided]["last_error"]
    assert rows[accepted]["status"] == "sent"
    assert set(Event.objects.values_list("id", flat=True)) == {
        other["id"],
        rows[accepted]["event_id"],
    }
    # In order of creation, each exactly once: the refused rows were not retried.
    assert [(f.key, f.status) for f in proxy.forwarded] == [
        (too_big, 413),
        (collided, 422),
        (accepted, 202),
    ]


def test_a_relay_killed_between_sending_and_marking_creates_no_second_event(
    alice, homing, homing_api, proxy, producer, receiver_factory
):
    receiver = receiver_factory()
    endpoint_via_api(alice, receiver.url)
    homing("worker")
    proxy.hold = 60  # Homing commits and answers; the relay does not hear it
    relay = producer.start_relay(proxy.url, alice.key)

    (outbox_id,) = producer.create_orders(amount=99).json()["outbox_ids"]
    wait_until(lambda: Event.objects.count() == 1, timeout=20)
    relay.kill_hard()  # kill -9: Homing has the event, the row is still pending
    assert [row["status"] for row in producer.rows()] == ["pending"]

    proxy.hold = 0
    producer.start_relay(proxy.url, alice.key)
    wait_until(lambda: producer.all_sent(1), timeout=20)

    (event,) = Event.objects.all()
    (row,) = producer.rows()
    assert row["event_id"] == event.id
    # The same row went out twice with its id as key; Homing replayed the first answer.
    assert [(f.key, f.replayed) for f in proxy.forwarded] == [
        (outbox_id, False),
        (outbox_id, True),
    ]
    (_webhook,) = receiver.wait_for(1, timeout=30)
    time.sleep(1.5)
    assert [r.headers["webhook-id"] for r in receiver.requests] == [event.id]


def test_two_relays_at_once_never_send_a_row_twice(alice, homing_api, proxy, producer):
    proxy.hold = 0.02  # enough for the two relays' batches to overlap in time
    for _ in range(2):
        producer.start_relay(proxy.url, alice.key, "--batch-size", "5")

    outbox_ids = []
    for _ in range(4):
        outbox_ids += producer.create_orders(count=10).json()["outbox_ids"]

    wait_until(lambda: producer.all_sent(40), timeout=60)
    assert Counter(proxy.sent_keys()) == Counter(outbox_ids)  # every row once, none twice
    assert not any(f.replayed for f in proxy.forwarded)
    assert Event.objects.count() == 40
    assert len({row["event_id"] for row in producer.rows()}) == 40
    # Both relays did take part (each logs what it relayed).
    assert all("Relayed" in relay.log() for relay in producer.relays)


def test_homing_down_for_ten_seconds_then_back_everything_arrives(
    alice, homing_api, proxy, producer
):
    producer.start_relay(proxy.url, alice.key)
    homing_api.stop()
    assert port_is_closed(homing_api.url)

    outbox_ids = producer.create_orders(count=3).json()["outbox_ids"]
    outbox_ids += producer.create_orders(count=2).json()["outbox_ids"]
    time.sleep(10)

    rows = producer.rows()
    assert [row["status"] for row in rows] == ["pending"] * 5  # waiting, nothing lost
    assert rows[0]["attempts"] >= 2 and "unreachable" in rows[0]["last_error"]
    assert producer.outbox_age() >= 9

    homing_api.start()
    wait_until(lambda: producer.all_sent(5), timeout=30)
    assert proxy.sent_keys() == outbox_ids  # in order of creation, each once
    assert Event.objects.count() == 5
    assert producer.outbox_age() == 0.0


def test_the_celery_task_relays_what_is_pending(alice, homing_api, proxy, producer):
    outbox_ids = producer.create_orders(count=3).json()["outbox_ids"]
    # The task's body, run in the producer's environment as a Celery worker would run it.
    code = "from homing_client.django.tasks import relay_outbox; print(relay_outbox())"
    result = subprocess.run(
        [sys.executable, "-m", "django", "shell", "-c", code],
        cwd=ROOT,
        env=process_env(
            DJANGO_SETTINGS_MODULE=PRODUCER_SETTINGS,
            PRODUCER_DATABASE_URL=producer.dsn,
            HOMING_URL=proxy.url,
            HOMING_API_KEY=alice.key,
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.stdout.splitlines()[-1:] == ["{'sent': 3, 'failed': 0, 'claimed': 3}"], (
        result.stdout + result.stderr
    )
    assert producer.all_sent(3)
    assert proxy.sent_keys() == outbox_ids


def test_the_relay_is_woken_by_the_commit_and_stops_cleanly_on_sigterm(
    alice, homing_api, proxy, producer
):
    # A poll ten times longer than the waits below: only the NOTIFY sent on commit can
    # wake it in time, and only stop() can end its wait.
    # A row committed before the relay listens, so no notification of it is queued: the
    # relay's first batch sends it, and once it is marked sent the relay waits.
    producer.create_orders(amount=1)
    relay = producer.start_relay(proxy.url, alice.key, "--poll-interval", "300")
    wait_until(lambda: producer.all_sent(1), timeout=30)

    producer.create_orders(amount=1)
    wait_until(lambda: producer.all_sent(2), timeout=30)  # woken, not polled (300 s)

    relay.popen.send_signal(signal.SIGTERM)
    assert relay.popen.wait(timeout=30) == 0  # its wait ends on stop(), not after 300 s
    assert "homing_relay: stopped" in relay.log()


def test_a_slow_homing_cuts_a_batch_short_and_the_rest_follows(alice, homing_api, proxy, producer):
    proxy.hold = 0.4  # every answer takes 0.4 s: a batch of 6 would keep its locks 2.4 s
    outbox_ids = producer.create_orders(count=6).json()["outbox_ids"]
    relay = producer.start_relay(
        proxy.url, alice.key, "--batch-size", "10", "--batch-seconds", "0.5"
    )

    wait_until(lambda: producer.all_sent(6), timeout=20)
    assert proxy.sent_keys() == outbox_ids  # still in order of creation, each once
    # Several short transactions (a row or two each), not one of 2.4 s.
    assert relay.log().count("Relayed ") >= 3, relay.log()


def test_a_wrong_api_key_leaves_rows_pending_instead_of_failing_them(
    alice, homing_api, proxy, producer
):
    outbox_ids = producer.create_orders(count=2).json()["outbox_ids"]
    wrong = producer.start_relay(proxy.url, "hom_not-a-key")

    wait_until(lambda: producer.rows()[0]["attempts"] >= 2, timeout=20)
    rows = producer.rows()
    assert [row["status"] for row in rows] == ["pending", "pending"]
    assert rows[0]["last_error"].startswith("HTTP 401: "), rows[0]["last_error"]
    assert rows[1]["attempts"] == 0  # the batch stopped at the first row: order is kept

    wrong.stop()
    producer.start_relay(proxy.url, alice.key)  # the operator fixes HOMING_API_KEY
    wait_until(lambda: producer.all_sent(2), timeout=20)
    assert proxy.sent_keys() == outbox_ids
