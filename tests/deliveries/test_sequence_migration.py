"""Migration deliveries/0008 numbers the deliveries made before sequences existed."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from deliveries.intake.ingest import event_ingest
from deliveries.models import Delivery, SequenceCounter
from tests.migrations import latest, migrate
from webhooks.models import Tenant

BEFORE = [("deliveries", "0007_delivery_due_by_time"), ("webhooks", "0006_routing_version")]


def test_existing_deliveries_are_numbered_per_endpoint_in_creation_order(transactional_db):
    old = migrate(BEFORE)
    tenant = old.get_model("webhooks", "Tenant").objects.create(id="ten_q", name="q")
    endpoints = [
        old.get_model("webhooks", "Endpoint").objects.create(
            id=f"ep_q{n}", tenant=tenant, url="https://example.com/h", secret="x"
        )
        for n in (1, 2)
    ]
    event = old.get_model("webhooks", "Event").objects.create(
        id="evt_q", tenant=tenant, type="a.b", data={}
    )
    start = timezone.now() - timedelta(hours=1)
    # Created out of id order: the numbers follow created_at.
    made = [
        ("dlv_q3", endpoints[0], 0),
        ("dlv_q1", endpoints[0], 2),
        ("dlv_q2", endpoints[0], 1),
        ("dlv_q4", endpoints[1], 5),
    ]
    old_delivery = old.get_model("deliveries", "Delivery")
    for delivery_id, endpoint, minutes in made:
        row = old_delivery.objects.create(
            id=delivery_id, tenant=tenant, event=event, endpoint=endpoint, status="succeeded"
        )
        old_delivery.objects.filter(pk=row.pk).update(created_at=start + timedelta(minutes=minutes))

    migrate(latest())

    numbered = dict(Delivery.objects.values_list("id", "sequence"))
    assert numbered == {"dlv_q3": 1, "dlv_q2": 2, "dlv_q1": 3, "dlv_q4": 1}
    assert dict(SequenceCounter.objects.values_list("endpoint_id", "last")) == {
        "ep_q1": 3,
        "ep_q2": 1,
    }
    # New deliveries go on from there.
    ingested = event_ingest(tenant=Tenant.objects.get(pk="ten_q"), event_type="a.b", data={})
    assert sorted(d.sequence for d in ingested.deliveries) == [2, 4]
