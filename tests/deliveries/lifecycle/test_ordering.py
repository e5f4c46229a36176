"""Ordering keys: one delivery of a key at a time per endpoint, in commit order."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from deliveries.intake.ingest import event_ingest
from deliveries.lifecycle.interventions import deliveries_kill_for_endpoint, delivery_retry_now
from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.models import Delivery
from deliveries.results import ErrorKind, SendResult
from deliveries.worker.claims import deliveries_claim
from dlq.models import DeadLetter
from tests.factories import endpoint_id_via_api
from tests.jobs import run_replay_jobs
from webhooks.models import Endpoint


def post(actor, key, n=0, event_type="order.paid"):
    body = {"type": event_type, "data": {"n": n}, "ordering_key": key}
    response = actor.client.post("/api/v1/events", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def status_of(event) -> str:
    return Delivery.objects.get(event_id=event["id"]).status


def answer(status_code: int | None, *, limit=100):
    """Claim what is due and record the same answer for each; the claimed deliveries."""
    claimed = deliveries_claim(limit=limit, policy=current_policy())
    if status_code is None:
        result = SendResult.failed(ErrorKind.CONNECTION, "connection refused")
    else:
        result = SendResult(status_code, None, b"", None, 5)
    now = timezone.now()
    attempts_record(
        outcomes=[Attempted(d, result, now, current_policy()) for d in claimed],
    )
    return claimed


def test_later_deliveries_of_a_key_wait_for_the_one_before(alice):
    endpoint = endpoint_id_via_api(alice)
    first, second, third = (post(alice, "order-1", n) for n in range(3))
    other_key, no_key = (
        post(alice, "order-2"),
        alice.client.post(
            "/api/v1/events", {"type": "order.paid", "data": {}}, format="json"
        ).json(),
    )

    rows = {d.event_id: d for d in Delivery.objects.filter(endpoint_id=endpoint)}
    assert [rows[e["id"]].status for e in (first, second, third)] == ["pending", "held", "held"]
    assert rows[second["id"]].blocked_by == rows[first["id"]].id
    assert rows[third["id"]].blocked_by == rows[second["id"]].id
    assert rows[first["id"]].head_since is not None
    assert rows[other_key["id"]].status == rows[no_key["id"]].status == "pending"
    # The API shows a held delivery as pending, naming what it waits for.
    assert second["deliveries"][0]["status"] == "pending"
    assert second["ordering_key"] == "order-1"
    shown = alice.client.get(f"/api/v1/deliveries/{rows[second['id']].id}").json()
    assert (shown["status"], shown["blocked_by"]) == ("pending", rows[first["id"]].id)
    pending = alice.client.get("/api/v1/deliveries?status=pending").json()["results"]
    assert len(pending) == 5


def test_finishing_the_first_releases_the_next_only(alice):
    endpoint_id_via_api(alice)
    events = [post(alice, "k", n) for n in range(3)]

    assert [d.event_id for d in answer(200)] == [events[0]["id"]]  # only the first is due
    assert [status_of(e) for e in events] == ["succeeded", "pending", "held"]
    assert [d.event_id for d in answer(404)] == [events[1]["id"]]  # dead also releases
    assert [status_of(e) for e in events] == ["succeeded", "dead", "pending"]
    released = Delivery.objects.get(event_id=events[2]["id"])
    assert released.blocked_by is None and released.head_since is not None


def test_a_failing_first_holds_its_key_until_it_succeeds(alice, settings):
    settings.HOMING_RETRY_SCHEDULE = "1ms,1ms,1ms"
    endpoint_id_via_api(alice)
    events = [post(alice, "k", n) for n in range(2)]
    answer(503)
    assert [status_of(e) for e in events] == ["pending", "held"]
    answer(200)
    assert [status_of(e) for e in events] == ["succeeded", "pending"]


def test_a_batch_lines_up_its_events_of_one_key_in_batch_order(alice):
    endpoint = endpoint_id_via_api(alice)
    batch = alice.client.post(
        "/api/v1/events/batch",
        {
            "events": [
                {"type": "a.b", "data": {"n": n}, "ordering_key": "k" if n % 2 else None}
                for n in range(6)
            ]
        },
        format="json",
    ).json()["events"]
    keyed = [Delivery.objects.get(event_id=e["id"]) for e in batch[1::2]]
    assert [d.sequence for d in keyed] == sorted(d.sequence for d in keyed)
    assert [d.status for d in keyed] == ["pending", "held", "held"]
    assert [d.blocked_by for d in keyed] == [None, keyed[0].id, keyed[1].id]
    unkeyed = Delivery.objects.filter(endpoint_id=endpoint, ordering_key__isnull=True)
    assert {d.status for d in unkeyed} == {"pending"}


def test_a_head_failing_past_the_max_block_dies_and_its_key_moves_on(alice, settings):
    settings.HOMING_ORDERING_MAX_BLOCK = 3600
    settings.HOMING_RETRY_SCHEDULE = "1ms,2h"
    endpoint_id_via_api(alice)
    events = [post(alice, "k", n) for n in range(2)]
    head = Delivery.objects.get(event_id=events[0]["id"])

    answer(503)  # the first failure: retried, but not after its deadline
    head.refresh_from_db()
    assert head.status == "pending"
    assert head.next_attempt_at is not None and head.head_since is not None
    assert head.next_attempt_at <= head.head_since + timedelta(seconds=3600)

    Delivery.objects.filter(pk=head.pk).update(
        head_since=timezone.now() - timedelta(hours=2), next_attempt_at=timezone.now()
    )
    answer(503)
    head.refresh_from_db()
    assert head.status == "dead"
    assert DeadLetter.objects.get(delivery=head).reason == "blocked its ordering key for 1h"
    assert status_of(events[1]) == "pending"


def test_a_replayed_dead_delivery_does_not_block_its_key_again(alice):
    endpoint_id_via_api(alice)
    first = post(alice, "k", 0)
    answer(404)
    letter = DeadLetter.objects.get()
    alice.client.post(f"/api/v1/dead-letters/{letter.pk}/replay")
    run_replay_jobs()
    later = post(alice, "k", 1)

    replayed = Delivery.objects.get(event_id=first["id"])
    assert (replayed.status, replayed.ordering_key) == ("pending", None)
    assert status_of(later) == "pending"  # not behind the replayed one


def test_retry_now_of_a_waiting_delivery_sends_it_and_closes_the_line_behind_it(alice):
    endpoint_id_via_api(alice)
    events = [post(alice, "k", n) for n in range(3)]
    rows = [Delivery.objects.get(event_id=e["id"]) for e in events]

    delivery_retry_now(delivery=Delivery.objects.select_related("endpoint").get(pk=rows[1].pk))

    rows = [Delivery.objects.get(pk=d.pk) for d in rows]
    assert [d.status for d in rows] == ["pending", "pending", "held"]
    assert rows[1].ordering_key is None and rows[1].blocked_by is None
    assert rows[2].blocked_by == rows[0].id  # waits for the one before the retried one


def test_deactivation_parks_waiting_deliveries_too(alice):
    endpoint = endpoint_id_via_api(alice)
    for n in range(3):
        post(alice, "k", n)
    Endpoint.objects.filter(pk=endpoint).update(is_active=False)
    assert deliveries_kill_for_endpoint(endpoint_id=endpoint, reason="endpoint deactivated") == 3
    assert set(Delivery.objects.values_list("status", flat=True)) == {"dead"}


@pytest.mark.parametrize("key", [7, "", "x" * 256, "tab\there", "del\x7f", ["list"], {"o": 1}])
def test_a_bad_ordering_key_is_a_400_naming_it(alice, key):
    endpoint_id_via_api(alice)
    body = {"type": "a.b", "data": {}, "ordering_key": key}
    response = alice.client.post("/api/v1/events", body, format="json")
    assert response.status_code == 400
    assert "ordering_key" in response.json()["errors"]
    batch = alice.client.post("/api/v1/events/batch", {"events": [body]}, format="json")
    assert batch.status_code == 400 and "events[0].ordering_key" in batch.json()["errors"]
    assert not Delivery.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_creating_and_finishing_at_once_never_strands_a_delivery(make_actor):
    """Producers add to 5 keys while a finisher claims and succeeds what is due: every
    delivery ends succeeded (none left held behind a finished one), each key in order."""
    actor = make_actor("Race")
    endpoint_id_via_api(actor)
    keys, per_key = 5, 30
    done = threading.Event()
    errors = []

    def produce(key: str) -> None:
        try:
            for n in range(per_key):
                event_ingest(tenant=actor.tenant, event_type="a.b", data={"n": n}, ordering_key=key)
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def finish() -> None:
        try:
            while not done.is_set() or Delivery.objects.exclude(status="succeeded").exists():
                answer(200)
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    finisher = threading.Thread(target=finish)
    finisher.start()
    producers = [threading.Thread(target=produce, args=(f"k{i}",)) for i in range(keys)]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join()
    done.set()
    finisher.join(timeout=60)

    assert errors == []
    assert not finisher.is_alive(), "deliveries were left waiting"
    assert Delivery.objects.filter(status="succeeded").count() == keys * per_key
    for i in range(keys):
        finished = list(
            Delivery.objects.filter(event__ordering_key=f"k{i}")
            .order_by("sequence")
            .values_list("event__data__n", "updated_at")
        )
        assert [n for n, _ in finished] == list(range(per_key))
        assert [at for _, at in finished] == sorted(at for _, at in finished)
