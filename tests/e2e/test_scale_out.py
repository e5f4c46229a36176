"""Scale-out: several workers and schedulers (separate OS processes) on one PostgreSQL
and Redis share 5,000 events without sending an attempt twice or losing one, hold each
endpoint's rate limit, and carry on when one worker is killed with kill -9."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections import Counter

import pytest
from django.utils import timezone

from deliveries.intake.sequences import sequences_take
from deliveries.models import Delivery
from tests.backlogs import due_backlog
from tests.processes import wait_until
from webhooks.models import Event
from webhooks.services.endpoints import endpoint_create
from webhooks.services.tenants import tenant_create

pytestmark = pytest.mark.e2e

EVENTS = 5_000
RATE_LIMIT = 100  # per second, on the first endpoint
SHARES = {"limited.x": 800, "b.x": 1400, "c.x": 1400, "d.x": 1400}
FAST = {"HOMING_DELIVERY_TIMEOUT": "5"}  # a killed worker's lease expires in 20 s


def most_in_any_second(times: list[float]) -> int:
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def test_it_scales_out_and_survives_a_killed_worker(homing, receiver_factory):
    assert sum(SHARES.values()) == EVENTS
    tenant, _ = tenant_create(name="Scale")
    receivers = {event_type: receiver_factory() for event_type in SHARES}
    endpoints = {
        event_type: endpoint_create(
            tenant=tenant,
            url=receivers[event_type].url,
            event_types=[event_type],
            rate_limit=RATE_LIMIT if event_type == "limited.x" else None,
        )
        for event_type in SHARES
    }
    workers = [homing("worker", concurrency=4, **FAST) for _ in range(3)]
    for _ in range(2):
        homing("scheduler", **FAST)

    # Bulk rows, as ingestion writes them: events and their due deliveries. The
    # schedulers' sweeps announce them to the workers.
    now = timezone.now()
    events = Event.objects.bulk_create(
        Event(tenant=tenant, type=event_type, data={"n": n})
        for event_type, count in SHARES.items()
        for n in range(count)
    )
    Delivery.objects.bulk_create(
        (
            Delivery(
                tenant=tenant,
                event=event,
                endpoint=endpoints[event.type],
                next_attempt_at=now,
                created_at=now,
                updated_at=now,
                sequence=sequence,
            )
            for event, sequence in zip(
                events,
                sequences_take([endpoints[event.type].pk for event in events]),
                strict=True,
            )
        ),
        batch_size=1000,
    )
    started = time.monotonic()

    def received() -> int:
        return sum(len(r.requests) for r in receivers.values())

    wait_until(lambda: received() >= EVENTS // 4, timeout=90, message="deliveries too slow")
    # Freeze the worker first, so that what it holds cannot change before it dies: every
    # delivery it had in flight is among those `delivering` now.
    os.killpg(workers[0].pid, signal.SIGSTOP)
    in_flight = set(Delivery.objects.filter(status="delivering").values_list("event_id", flat=True))
    workers[0].kill_hard()
    killed_at = time.time()

    wait_until(
        lambda: not Delivery.objects.exclude(status="succeeded").exists(),
        timeout=150,
        interval=0.5,
        message="not every delivery succeeded after a worker was killed",
    )
    elapsed = time.monotonic() - started
    time.sleep(0.5)  # a straggling duplicate would arrive now

    for event_type, receiver in receivers.items():
        ids = Counter(request.headers["webhook-id"] for request in receiver.requests)
        expected = {event.id for event in events if event.type == event_type}
        assert set(ids) == expected, f"{event_type}: events lost or strayed"
        twice = {webhook_id for webhook_id, n in ids.items() if n > 1}
        # Only what the killed worker had in flight may arrive again (same webhook-id).
        arrivals = {
            webhook_id: [
                round(r.at - killed_at, 1)
                for r in receiver.requests
                if r.headers["webhook-id"] == webhook_id
            ]
            for webhook_id in twice - in_flight
        }
        assert twice <= in_flight, f"{event_type}: sent twice (s after the kill): {arrivals}"
        assert max(ids.values()) <= 2
    limited = sorted(request.at for request in receivers["limited.x"].requests)
    # Measured at the receiver, on a busy machine: a send allowed in one second can land
    # in the next. Held on average (the span an honest limit needs), and never a burst
    # beyond 2x (the strict sliding-window bound is test_rate_limit_holds_in_any_sliding_second's,
    # on a quieter machine than this test makes).
    per_second = Counter(int(at) for at in limited)
    assert limited[-1] - limited[0] >= SHARES["limited.x"] / RATE_LIMIT - 1
    assert most_in_any_second(limited) <= 2 * RATE_LIMIT
    print(
        f"{EVENTS} deliveries by 3 workers (one killed) in {elapsed:.1f} s; rate-limited "
        f"endpoint: at most {max(per_second.values())} in a calendar second, "
        f"{most_in_any_second(limited)} in a sliding one"
    )


def test_rate_limit_holds_in_any_sliding_second(homing, receiver_factory):
    tenant, _ = tenant_create(name="Sliding")
    receiver = receiver_factory()
    endpoint = endpoint_create(tenant=tenant, url=receiver.url, rate_limit=50)
    homing("worker", concurrency=4, **FAST)
    homing("scheduler", **FAST)
    due_backlog(tenant, endpoint, 300)
    receiver.wait_for(300, timeout=60)
    assert most_in_any_second([request.at for request in receiver.requests]) <= 50 * 1.1


def test_rate_limit_5_with_three_workers_is_spread_evenly(homing, receiver_factory):
    tenant, _ = tenant_create(name="Five")
    receiver = receiver_factory()
    endpoint = endpoint_create(tenant=tenant, url=receiver.url, rate_limit=5)
    for _ in range(3):
        homing("worker", concurrency=4, **FAST)
    due_backlog(tenant, endpoint, 40)
    homing("scheduler", **FAST)
    times = sorted(r.at for r in receiver.wait_for(40, timeout=30))
    # Homing's schedule never puts 6 in a second (tests/deliveries/worker/test_rate_limits.py
    # pins the 0.22 s spacing). Arrival times at the receiver add the machine's own delays:
    # on a loaded CI box one request arrived 0.12 s late and the next on time, so a sliding
    # second held 6. Counting per calendar second, as before the GCRA, let 10 through.
    assert most_in_any_second(times) <= 5 + 1
    # Spread out, not bursts: consecutive requests about 1/5 s apart.
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert sorted(gaps)[len(gaps) // 2] >= 0.15
    assert times[-1] - times[0] >= 39 / 5 * 0.95
