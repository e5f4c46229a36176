"""Per-endpoint sequence numbers: 1, 2, 3, … without gaps, in commit order."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, connections, transaction

from deliveries.intake.ingest import endpoint_send_test, event_ingest, events_ingest
from deliveries.intake.sequences import sequences_numbered
from deliveries.models import Delivery, SequenceCounter
from tests.factories import endpoint_id_via_api
from webhooks.models import Endpoint
from webhooks.services.event_input import EventInput


def sequences_of(endpoint_id: str) -> list[int]:
    return list(
        Delivery.objects.filter(endpoint_id=endpoint_id)
        .order_by("created_at", "id")
        .values_list("sequence", flat=True)
    )


def test_numbers_follow_a_batch_order_then_the_next_event(alice):
    endpoint = endpoint_id_via_api(alice)
    batch = alice.client.post(
        "/api/v1/events/batch",
        {"events": [{"type": "a.b", "data": {"n": n}} for n in range(5)]},
        format="json",
    ).json()["events"]
    single = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")

    assert [e["deliveries"][0]["sequence"] for e in batch] == [1, 2, 3, 4, 5]
    assert single.json()["deliveries"][0]["sequence"] == 6
    # What the 202 said is what the rows hold.
    for event in [*batch, single.json()]:
        delivery = event["deliveries"][0]
        assert Delivery.objects.get(pk=delivery["id"]).sequence == delivery["sequence"]
    assert SequenceCounter.objects.get(endpoint_id=endpoint).last == 6


def test_each_endpoint_counts_its_own_deliveries(alice, bob):
    orders = endpoint_id_via_api(alice, event_types=["order.*"])
    everything = endpoint_id_via_api(alice)
    elsewhere = endpoint_id_via_api(bob)
    for event_type in ["order.paid", "invoice.sent", "order.refunded", "invoice.paid"]:
        alice.client.post("/api/v1/events", {"type": event_type, "data": {}}, format="json")
    bob.client.post("/api/v1/events", {"type": "order.paid", "data": {}}, format="json")

    assert sequences_of(orders) == [1, 2]
    assert sequences_of(everything) == [1, 2, 3, 4]
    assert sequences_of(elsewhere) == [1]


def test_a_rolled_back_ingestion_gives_its_numbers_back(alice):
    endpoint = endpoint_id_via_api(alice)
    event_ingest(tenant=alice.tenant, event_type="a.b", data={})
    with pytest.raises(RuntimeError), transaction.atomic():
        event_ingest(tenant=alice.tenant, event_type="a.b", data={})
        raise RuntimeError("the caller's transaction fails after the ingestion")
    event_ingest(tenant=alice.tenant, event_type="a.b", data={})

    assert sequences_of(endpoint) == [1, 2]


def test_a_test_event_takes_the_next_number(alice):
    endpoint_id = endpoint_id_via_api(alice)
    before = event_ingest(tenant=alice.tenant, event_type="a.b", data={})
    _, delivery = endpoint_send_test(endpoint=Endpoint.objects.get(pk=endpoint_id))
    after = event_ingest(tenant=alice.tenant, event_type="a.b", data={})

    # By each delivery, not by creation time: the test event's row takes this process's
    # clock, an ingest the database's as this process reads it, a millisecond apart.
    in_turn = [before.deliveries[0].id, delivery.pk, after.deliveries[0].id]
    assert [Delivery.objects.get(pk=pk).sequence for pk in in_turn] == [1, 2, 3]


def test_numbering_follows_the_listed_order_per_endpoint():
    assert sequences_numbered(["a", "b", "a", "a", "b"], {"a": 10, "b": 2}) == [8, 1, 9, 10, 2]


@pytest.mark.django_db(transaction=True)
def test_concurrent_producers_never_let_a_reader_see_a_gap(make_actor):
    """8 producers post to two endpoints at once; a reader polling all the while never
    sees a sequence while a lower one of its endpoint is missing (commit order), and
    the end state is 1..n on each endpoint."""
    actor = make_actor("Concurrent")
    endpoints = [endpoint_id_via_api(actor), endpoint_id_via_api(actor)]
    producers, per_producer = 8, 25
    stop = threading.Event()
    seen_gaps: list[Any] = []
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for n in range(per_producer):
                if n % 5 == 0:
                    items = [EventInput(type="a.b", data={"n": n, "i": i}) for i in range(3)]
                    events_ingest(tenant=actor.tenant, inputs=items)
                else:
                    event_ingest(tenant=actor.tenant, event_type="a.b", data={"n": n})
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    def observe() -> None:
        try:
            while not stop.is_set():
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT endpoint_id, count(*), coalesce(max(sequence), 0) "
                        "FROM deliveries_delivery WHERE endpoint_id = ANY(%s) "
                        "GROUP BY endpoint_id",
                        [endpoints],
                    )
                    seen_gaps.extend(row for row in cursor.fetchall() if row[1] != row[2])
        finally:
            connections.close_all()

    observer = threading.Thread(target=observe)
    observer.start()
    threads = [threading.Thread(target=produce) for _ in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    observer.join()

    assert errors == []
    assert seen_gaps == []
    events = producers * (per_producer + (per_producer // 5) * 2)
    for endpoint in endpoints:
        numbers = sorted(Delivery.objects.filter(endpoint_id=endpoint).values_list("sequence"))
        assert [n for (n,) in numbers] == list(range(1, events + 1))


@pytest.mark.django_db(transaction=True)
def test_fan_outs_over_many_endpoints_at_once_do_not_deadlock(make_actor):
    """Batches whose events fan out to the same ten endpoints, from six producers at
    once: counters are locked in one order, so none waits for another in a cycle."""
    actor = make_actor("Fan-out")
    endpoints = [endpoint_id_via_api(actor) for _ in range(10)]
    errors = []

    def produce(seed: int) -> None:
        try:
            for round_ in range(10):
                items = [
                    EventInput(type="a.b", data={"s": seed, "r": round_, "i": i}) for i in range(4)
                ]
                events_ingest(tenant=actor.tenant, inputs=items)
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=produce, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    for endpoint in endpoints:
        assert sorted(sequences_of(endpoint)) == list(range(1, 6 * 10 * 4 + 1))


@pytest.mark.django_db(transaction=True)
def test_an_ingestion_writes_its_events_before_it_waits_for_the_counter(alice, monkeypatch):
    """A counter row stays locked from its upsert to the commit, and every other creator
    for the endpoint waits for it (many producers on one endpoint queue there): the
    events are written before it is taken, so it is held for less. Seen from outside:
    while an ingestion waits for the counter, its event's id is already taken."""
    import psycopg

    from core.ids import new_id

    endpoint = endpoint_id_via_api(alice)
    event_ingest(tenant=alice.tenant, event_type="a.b", data={})  # the counter row exists
    monkeypatch.setattr(
        "deliveries.intake.ingest.new_id",
        lambda prefix: "evt_waiting" if prefix == "evt" else new_id(prefix),
    )
    params = connection.get_connection_params()
    with psycopg.connect(**params) as holder, psycopg.connect(**params) as prober:
        holder.execute(
            "SELECT last FROM deliveries_sequencecounter WHERE endpoint_id = %s FOR UPDATE",
            [endpoint],
        )
        answers: list[Any] = []

        def ingest() -> None:
            try:
                answers.append(event_ingest(tenant=alice.tenant, event_type="a.b", data={}))
            finally:
                connections.close_all()

        thread = threading.Thread(target=ingest)
        thread.start()
        for _ in range(500):  # until the ingestion waits for the counter's lock
            waiting = prober.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%WITH gate AS MATERIALIZED%%'"
            ).fetchone()
            prober.rollback()
            if waiting and waiting[0]:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the ingestion never waited for the counter")

        prober.execute("SET lock_timeout = '300ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):  # its uncommitted event holds it
            prober.execute(
                "INSERT INTO webhooks_event (id, tenant_id, type, data, created_at) "
                "VALUES ('evt_waiting', %s, 'a.b', '{}', now())",
                [alice.tenant.pk],
            )
        prober.rollback()
        holder.rollback()  # the counter is free: the ingestion goes on
        thread.join(10)

    assert [event.id for event in answers] == ["evt_waiting"]
    assert answers[0].deliveries[0].sequence == 2
