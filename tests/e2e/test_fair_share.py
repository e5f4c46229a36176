"""Fair share between tenants (CONTRACT sections 4 and 5): while one tenant's backlog of
40,000 deliveries on 20 fast endpoints drains through two worker processes, another
tenant's new events still start within 2 s (p99), whether a wake-up message announces
them or the workers' claims must find them among the due rows by themselves; and while
one tenant's slow-but-healthy endpoints could hold every place of a worker, they hold at
most HOMING_TENANT_SHARE of them, so another tenant's events still start within 2 s."""

from __future__ import annotations

import time

import pytest

from tests.backlogs import due_backlog
from tests.latency import first_sight, p99, paced, post_event, start_delays, wait_for_ids
from tests.processes import wait_until
from tests.receivers import Answer, most_at_once
from webhooks.models import Endpoint, Tenant
from webhooks.services.endpoints import endpoint_create

# Serial: each asserts a start-time p99 (the contract's 2 s), which the parallel pass's
# other end-to-end tests can starve of CPU (seen once: the busy tenant itself delivered
# 996 deliveries in the window instead of ~12,000, and the quiet one's p99 read 4.3 s).
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

BUSY_ENDPOINTS = 20
BUSY_EVENTS = 2_000  # each to all 20 endpoints: 40,000 deliveries
BATCH = 1_000  # events per POST /events/batch (HOMING_MAX_BATCH_EVENTS)
QUIET_EVENTS = 40
PACE = 0.15  # seconds between the quiet tenant's events: 6 s of them
START_P99 = 2.0  # seconds, the contract's start time under load
PATIENCE = 6.0  # seconds after the last quiet event before one counts as lost


def queue_backlog(actor) -> None:
    """The busy tenant's backlog, through the batch API (one statement per batch)."""
    for first in range(0, BUSY_EVENTS, BATCH):
        events = [{"type": "busy.x", "data": {"n": n}} for n in range(first, first + BATCH)]
        response = actor.client.post("/api/v1/events/batch", {"events": events}, format="json")
        assert response.status_code == 202, response.content


def insert_due(tenant: Tenant, endpoint: Endpoint, n: int) -> str:
    """An event and its due delivery whose wake-up message was lost."""
    return due_backlog(tenant, endpoint, 1, event_type="quiet.x")[0].id


@pytest.mark.parametrize("announced", [True, False], ids=["woken", "unannounced"])
def test_a_deep_backlog_does_not_delay_another_tenants_events(
    announced, alice, bob, homing, receiver_factory
):
    busy = [receiver_factory() for _ in range(BUSY_ENDPOINTS)]
    for receiver in busy:
        endpoint_create(tenant=alice.tenant, url=receiver.url)
    quiet = receiver_factory()
    quiet_endpoint = endpoint_create(tenant=bob.tenant, url=quiet.url)
    queue_backlog(alice)
    homing("worker")
    homing("worker")
    homing("scheduler")

    wait_until(
        lambda: sum(len(r.requests) for r in busy) >= 500,
        timeout=40,
        message="the busy tenant's backlog did not start draining",
    )

    def send(n: int) -> str:
        if announced:  # the real API: committed, then a wake-up message
            return post_event(bob, "quiet.x", n)
        return insert_due(bob.tenant, quiet_endpoint, n)

    accepted = paced(QUIET_EVENTS, PACE, send)
    wait_for_ids(quiet, accepted, timeout=PATIENCE)

    delays = sorted(start_delays(accepted, quiet))  # inf: never seen
    seen = [d for d in delays if d != float("inf")]
    lost = len(delays) - len(seen)
    quiet_seen = first_sight(quiet)
    last_quiet = max((quiet_seen[i] for i in accepted if i in quiet_seen), default=time.time())
    busy_done = sum(1 for r in busy for at in first_sight(r).values() if at <= last_quiet)
    figures = (
        f"quiet tenant ({'woken' if announced else 'unannounced'}): start p99 "
        f"{p99(delays):.2f}s, median {delays[len(delays) // 2]:.2f}s; {lost} of {len(delays)} "
        f"not seen within {PATIENCE:.0f}s (slowest seen "
        f"{', '.join(f'{d:.2f}' for d in seen[-4:])}); "
        f"the busy tenant had {busy_done} of "
        f"{BUSY_EVENTS * BUSY_ENDPOINTS} delivered when the last quiet one arrived"
    )
    print(figures)
    assert not lost, figures
    assert p99(delays) <= START_P99, figures
    # The measurement shows contention only if the backlog was still there throughout.
    assert busy_done < BUSY_EVENTS * BUSY_ENDPOINTS, figures


SLOW_ENDPOINTS = 10
SLOW_SECONDS = 3.0  # each answers 200, after this long: healthy, so no circuit opens
SLOW_EVENTS = 300  # each to all 10 endpoints: 3,000 deliveries
STEADY_EVENTS = 90
STEADY_PACE = 1 / 30  # the quiet tenant posts 30 events a second, for 3 s


@pytest.mark.parametrize("share", ["0.5"])  # "1" fails: no share (see below)
def test_slow_but_healthy_endpoints_of_one_tenant_leave_room_for_another(
    share, alice, bob, homing, receiver_factory
):
    """The worker's default capacity (400 places, 50 per endpoint): without a tenant
    share, alice's ten slow endpoints hold every place for SLOW_SECONDS at a time and bob's
    events wait for a place to free (measured with "1": p99 3.20 s, median 1.76 s; with
    "0.5": p99 0.05 s, median 0.01 s)."""
    slow = [
        receiver_factory(lambda request, n: Answer(delay=SLOW_SECONDS))
        for _ in range(SLOW_ENDPOINTS)
    ]
    for receiver in slow:
        endpoint_create(tenant=alice.tenant, url=receiver.url)
    steady = receiver_factory()
    endpoint_create(tenant=bob.tenant, url=steady.url)
    events = [{"type": "slow.x", "data": {"n": n}} for n in range(SLOW_EVENTS)]
    response = alice.client.post("/api/v1/events/batch", {"events": events}, format="json")
    assert response.status_code == 202, response.content
    homing("worker", HOMING_TENANT_SHARE=share)
    homing("scheduler")

    # Alice's attempts fill what they may of the worker before bob's events come.
    wait_until(
        lambda: sum(len(r.requests) for r in slow) >= 150,
        timeout=30,
        message="the slow tenant's backlog did not start",
    )
    accepted = paced(STEADY_EVENTS, STEADY_PACE, lambda n: post_event(bob, "steady.x", n))
    wait_for_ids(steady, accepted, timeout=SLOW_SECONDS * 3)

    delays = sorted(start_delays(accepted, steady))
    in_flight_at_most = max(
        most_at_once([r.at for r in receiver.requests], SLOW_SECONDS) for receiver in slow
    )
    slow_sent = sum(len(r.requests) for r in slow)
    figures = (
        f"HOMING_TENANT_SHARE={share}: the steady tenant's first attempts started p99 "
        f"{p99(delays):.2f}s, median {delays[len(delays) // 2]:.2f}s after their POST; the "
        f"slow tenant had {slow_sent} requests sent, at most {in_flight_at_most} open at once "
        f"to one endpoint"
    )
    print(figures)
    assert p99(delays) <= START_P99, figures
    # Bob's events came while alice's backlog still held her share of the places.
    assert slow_sent < SLOW_EVENTS * SLOW_ENDPOINTS, figures
