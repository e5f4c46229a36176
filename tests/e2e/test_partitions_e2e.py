"""Five-second partitions under traffic: the scheduler drops expired intervals while
events come in and a worker delivers them, and nothing unfinished is lost. (Short
intervals keep the test short; the scheduler then looks every quarter interval.)"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connection, connections

from core.ids import id_millisecond
from deliveries.intake.ingest import event_ingest
from deliveries.lifecycle.partitions import partitions_ensure, partitions_list
from deliveries.models import Delivery, SequenceCounter
from tests.factories import endpoint_via_api
from tests.processes import wait_until
from tests.receivers import Answer
from webhooks.models import Event

pytestmark = pytest.mark.e2e

PROCESS_ENV = {
    "HOMING_PARTITION_INTERVAL": "5s",
    "HOMING_RETENTION": "5s",
    "HOMING_RETRY_SCHEDULE": "1h",  # a failed delivery stays pending for the whole test
}


INTERVAL_MS = 5_000


def _drop_ranged_partitions() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE webhooks_event, deliveries_delivery, deliveries_attempt")
        for p in partitions_list():
            if p.start_ms is not None:
                cursor.execute(f"DROP TABLE {p.name}")


@pytest.fixture
def minute_partitions(transactional_db, settings) -> Iterator[None]:
    """Five-second partitions from now on instead of the migration's days; the days back
    afterwards for the tests that follow."""
    settings.HOMING_PARTITION_INTERVAL = INTERVAL_MS / 1000
    settings.HOMING_RETENTION = INTERVAL_MS / 1000
    _drop_ranged_partitions()
    partitions_ensure()
    yield
    _drop_ranged_partitions()
    settings.HOMING_PARTITION_INTERVAL = 86400
    partitions_ensure()


def test_drops_under_traffic_lose_nothing_unfinished(
    minute_partitions, alice, homing, receiver_factory
):
    # minute_partitions first: its teardown then runs after the processes stopped.
    good = receiver_factory()
    stuck = receiver_factory(lambda request, n: Answer(status=503))
    paid = endpoint_via_api(alice, good.url, event_types=["order.paid"])["id"]
    endpoint_via_api(alice, stuck.url, event_types=["order.stuck"])
    homing("worker", **PROCESS_ENV)
    scheduler = homing("scheduler", **PROCESS_ENV)
    # In the first interval: one delivery that stays pending (its retry is an hour away).
    held = event_ingest(tenant=alice.tenant, event_type="order.stuck", data={}).deliveries[0]
    stuck.wait_for(1)

    stop = threading.Event()
    sent: list[str] = []

    def produce() -> None:
        try:
            while not stop.is_set():
                ingested = event_ingest(tenant=alice.tenant, event_type="order.paid", data={})
                sent.append(ingested.id)
                time.sleep(0.05)
        finally:
            connections.close_all()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        made = id_millisecond(held.id)
        assert made is not None
        first = made // INTERVAL_MS * INTERVAL_MS  # the held delivery's interval
        # The interval after the held delivery's expires at its end plus the retention,
        # and the scheduler looks every quarter interval: within about 15 s (a busy
        # machine may take longer: the bound only catches "never").
        wait_until(
            lambda: first + INTERVAL_MS not in _ranged_starts(),
            timeout=120,
            interval=2,
            message="the interval after the held delivery's was not dropped",
        )
        # Traffic before the drop, and after it (counts, not seconds: a busy machine
        # starts the worker late, and the drop may then come a few events in).
        at_drop = len(sent)
        wait_until(lambda: len(sent) >= at_drop + 20, timeout=60, message="no traffic after")
    finally:
        stop.set()
        producer.join()
    # No drop from here on: with 5-second intervals one came between reading the feed's
    # boundary and asking the feed (140 answered for a boundary read as 138).
    scheduler.stop()

    # The held delivery's interval is kept, with its event: it goes out when due.
    assert first in _ranged_starts()
    assert Delivery.objects.get(pk=held.id).status == "pending"
    assert Event.objects.filter(pk=held.event_id).exists()
    assert at_drop > 0  # traffic went on through the drop
    # Every event came through exactly once, dropped or not.
    requests = good.wait_for(len(sent), timeout=60)
    webhook_ids = Counter(r.headers["webhook-id"] for r in requests)
    assert set(webhook_ids) == set(sent) and max(webhook_ids.values()) == 1
    # Nothing still unfinished went with a drop.
    assert (
        not Delivery.objects.filter(endpoint_id=paid, status="pending")
        .exclude(event_id__in=Event.objects.values("id"))
        .exists()
    )
    # The feed answers 410 exactly below what is gone, and serves from one above.
    purged = SequenceCounter.objects.get(endpoint_id=paid).purged_through
    assert purged > 0
    assert not Delivery.objects.filter(endpoint_id=paid, sequence=purged).exists()
    expired = alice.client.get(f"/api/v1/endpoints/{paid}/messages", {"after": 0})
    assert expired.status_code == 410 and expired.json()["oldest_sequence"] == purged + 1
    page = alice.client.get(f"/api/v1/endpoints/{paid}/messages", {"after": purged}).json()
    assert page["results"][0]["sequence"] == purged + 1


def _ranged_starts() -> set[int]:
    return {p.start_ms for p in partitions_list() if p.start_ms is not None}
