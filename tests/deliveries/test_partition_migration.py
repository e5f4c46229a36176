"""Migration deliveries/0013 partitions history that the previous schema made: every
row lands in the partition of its id's time (or the default one), nothing is lost."""

from __future__ import annotations

import time

from django.db import connection

from core.ids import id_at
from deliveries.models import Attempt, Delivery
from tests.databases import postgresql_only
from tests.migrations import latest, migrate
from webhooks.models import Event

BEFORE = [("deliveries", "0011_endpoint_minutes"), ("webhooks", "0015_event_trace_context")]
DAY = 86_400_000


def partition_of(table: str, row_id: str, key: str = "id") -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE {key} = %s", [row_id])
        return cursor.fetchone()[0]


@postgresql_only
def test_rows_of_the_previous_schema_move_into_partitions(transactional_db):
    old = migrate(BEFORE)
    tenant = old.get_model("webhooks", "Tenant").objects.create(id="ten_m", name="m")
    endpoint = old.get_model("webhooks", "Endpoint").objects.create(
        id="ep_m", tenant=tenant, url="https://example.com/h", secret="x"
    )
    now = int(time.time() * 1000)
    made = {
        "three days ago": now - 3 * DAY,
        "now": now,
        # Ids from before the current alphabet sort after every new one: the default.
        "old alphabet": None,
    }
    ids = {}
    for n, (name, ms) in enumerate(made.items(), start=1):
        evt = id_at("evt", ms) if ms else "evt_aaaaaaaaaaaaaaaaaaaaaaaaa" + str(n)
        dlv = id_at("dlv", ms) if ms else "dlv_aaaaaaaaaaaaaaaaaaaaaaaaa" + str(n)
        event = old.get_model("webhooks", "Event").objects.create(
            id=evt, tenant=tenant, type="a.b", data={"n": n}
        )
        delivery = old.get_model("deliveries", "Delivery").objects.create(
            id=dlv, tenant=tenant, event=event, endpoint=endpoint, status="succeeded", sequence=n
        )
        for number in (1, 2):
            old.get_model("deliveries", "Attempt").objects.create(
                delivery=delivery, number=number, started_at="2026-01-01T00:00:00Z"
            )
        ids[name] = (evt, dlv)

    migrate(latest())

    assert Event.objects.count() == 3 and Delivery.objects.count() == 3
    assert Attempt.objects.count() == 6
    assert sorted(Delivery.objects.values_list("sequence", flat=True)) == [1, 2, 3]
    for name, (evt, dlv) in ids.items():
        where = "_default" if name == "old alphabet" else "_p"
        assert where in partition_of("webhooks_event", evt), name
        assert where in partition_of("deliveries_delivery", dlv), name
        assert where in partition_of("deliveries_attempt", dlv, key="delivery_id"), name
    # Three days back got a partition of its own, to be dropped when it expires.
    assert partition_of("webhooks_event", ids["three days ago"][0]) != partition_of(
        "webhooks_event", ids["now"][0]
    )
    # New attempts are numbered after the moved ones.
    moved = max(Attempt.objects.values_list("id", flat=True))
    new = Attempt.objects.create(
        delivery_id=ids["now"][1], number=3, started_at="2026-01-01T00:00:00Z"
    )
    assert new.id > moved
