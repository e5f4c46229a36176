"""Deactivating an endpoint with a 50,000-deep backlog parks it in bounded batches,
in bounded memory, while other tenants' deliveries keep flowing."""

from __future__ import annotations

import logging
import threading
import time
import tracemalloc

import pytest
from django.db import connection

from deliveries.lifecycle.interventions import deliveries_kill_for_endpoint
from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.backlogs import RESERVE_SEQUENCES
from webhooks.models import Endpoint

pytestmark = pytest.mark.e2e

BACKLOG = 50_000


def test_a_50000_deep_backlog_is_parked_in_bounded_memory_while_others_flow(
    alice, bob, homing, receiver_factory, caplog
):
    # Each parked delivery is logged (WARNING); pytest would keep all 50,000 records in
    # this process's memory, which a worker's log handler does not.
    caplog.set_level(logging.ERROR, logger="dlq.services.dead_letters")
    assert (
        alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/x"}, format="json")
    ).status_code == 201
    endpoint = Endpoint.objects.get(tenant=alice.tenant)
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {"big": "x" * 2000}}, format="json")
    event_id = Delivery.objects.get(endpoint=endpoint).event_id
    with connection.cursor() as cursor:  # fast: one INSERT … SELECT, far in the future
        cursor.execute(
            f"""{RESERVE_SEQUENCES}
            INSERT INTO {Delivery._meta.db_table} (id, tenant_id, event_id, endpoint_id,
                status, attempt_count, schedule_offset, next_attempt_at, last_error,
                created_at, updated_at, sequence)
            SELECT 'dlv_bulk' || n, %s, %s, %s, 'pending', 0, 0,
                now() + interval '1 day', '', now(), now(), (SELECT last FROM reserved) - %s + n
            FROM generate_series(1, %s) AS n""",
            [endpoint.id, BACKLOG, alice.tenant.id, event_id, endpoint.id, BACKLOG, BACKLOG],
        )
    healthy = receiver_factory()
    assert (
        bob.client.post("/api/v1/endpoints", {"url": healthy.url}, format="json").status_code == 201
    )
    # Deactivated (as PATCH does, without its job): parked below, by the job's service.
    Endpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
    homing("worker")

    parked: list[int] = []

    def park() -> None:
        try:
            parked.append(
                deliveries_kill_for_endpoint(endpoint_id=endpoint.id, reason="endpoint deactivated")
            )
        finally:
            connection.close()  # this thread's own connection

    tracemalloc.start()
    killer = threading.Thread(target=park)
    started = time.monotonic()
    killer.start()
    for n in range(50):
        bob.client.post("/api/v1/events", {"type": "b.c", "data": {"n": n}}, format="json")
    healthy.wait_for(50, timeout=60)
    killer.join(timeout=120)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    assert parked == [BACKLOG + 1]
    assert DeadLetter.objects.filter(endpoint_id=endpoint.id).count() == BACKLOG + 1
    assert peak < 40 * 1024 * 1024, f"parking peaked at {peak / 1e6:.0f} MB"
    print(f"parked {BACKLOG} in {time.monotonic() - started:.1f}s, peak {peak / 1e6:.1f} MB")
