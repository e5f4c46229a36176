"""The scheduler runs the retention purge by itself, however many schedulers run."""

from __future__ import annotations

import pytest

from tests.factories import delivery_row, endpoint_row
from tests.processes import wait_until
from webhooks.models import Event
from webhooks.services.tenants import tenant_create

pytestmark = pytest.mark.e2e


def test_schedulers_purge_old_finished_events(homing):
    tenant, _ = tenant_create(name="Acme")
    ep = endpoint_row(tenant)
    old = [delivery_row(ep, "succeeded", age_days=40) for _ in range(3)]
    waiting = delivery_row(ep, "dead", age_days=40, dead_letter="waiting")
    recent = delivery_row(ep, "succeeded")

    homing("scheduler")
    homing("scheduler")

    wait_until(
        lambda: not Event.objects.filter(pk__in=[d.event_id for d in old]).exists(),
        timeout=30,
        message="the scheduler did not purge old finished events",
    )
    assert set(Event.objects.values_list("id", flat=True)) == {
        waiting.event_id,
        recent.event_id,
    }
