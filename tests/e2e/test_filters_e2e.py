"""Filters end to end: three endpoints of one tenant with different filters receive 1,000
mixed events while a worker is killed with kill -9; each receiver gets exactly the events
its filter matches, numbered 1…n by `homing-sequence` without a gap."""

from __future__ import annotations

import os
import random
import signal
from collections import Counter

import pytest
from rest_framework.test import APIClient

from deliveries.models import Delivery
from tests.processes import wait_until

pytestmark = pytest.mark.e2e

EVENTS = 1_000
FAST = {"HOMING_DELIVERY_TIMEOUT": "5"}  # a killed worker's leases expire in seconds

FILTERS = {
    "big": {"data": {"amount": {"$gte": 500}}},
    "european_orders": {
        "type": {"$startsWith": "order."},
        "data": {"region": {"$in": ["eu", "uk"]}},
    },
    "vip_or_keyed": {
        "$or": [{"data": {"tags": "vip"}}, {"ordering_key": {"$neq": None}}],
        "data": {"status": {"$neq": "void"}},
    },
}


# The same rules written plainly, independently of the compiler, to say what each
# receiver must get.
def _expected(name: str, event: dict) -> bool:
    data = event["data"]
    if name == "big":
        return data["amount"] >= 500
    if name == "european_orders":
        return event["type"].startswith("order.") and data.get("region") in ("eu", "uk")
    return ("vip" in data["tags"] or event.get("ordering_key") is not None) and data.get(
        "status"
    ) != "void"


def _mixed_events(seed: int) -> list[dict]:
    rng = random.Random(seed)
    events = []
    for n in range(EVENTS):
        data = {
            "n": n,
            "amount": rng.choice([5, 120, 499, 500, 501.5, 9000]),
            "tags": rng.sample(["vip", "eu", "new", "b2b"], k=rng.randint(0, 2)),
        }
        if rng.random() < 0.8:
            data["region"] = rng.choice(["eu", "uk", "us"])
        if rng.random() < 0.3:
            data["status"] = rng.choice(["void", "open"])
        event = {"type": rng.choice(["order.paid", "order.sent", "invoice.paid"]), "data": data}
        if rng.random() < 0.1:
            event["ordering_key"] = f"cus_{rng.randint(1, 5)}"
        events.append(event)
    return events


def test_three_filtered_endpoints_get_exactly_their_events_across_a_kill_9(
    alice, homing, receiver_factory
):
    receivers = {name: receiver_factory() for name in FILTERS}
    endpoints = {}
    for name, spec in FILTERS.items():
        made = alice.client.post(
            "/api/v1/endpoints", {"url": receivers[name].url, "filter": spec}, format="json"
        )
        assert made.status_code == 201, made.content
        endpoints[name] = made.json()["id"]
    workers = [homing("worker", concurrency=4, **FAST) for _ in range(2)]
    homing("scheduler", **FAST)

    events = _mixed_events(seed=33)
    ids: list[str] = []
    client: APIClient = alice.client
    for start in range(0, EVENTS, 100):  # batches, each one statement, through the API
        chunk = events[start : start + 100]
        if start == 500:  # and half a batch's worth one by one
            for event in chunk:
                answer = client.post("/api/v1/events", event, format="json")
                assert answer.status_code == 202, answer.content
                ids.append(answer.json()["id"])
            continue
        answer = client.post("/api/v1/events/batch", {"events": chunk}, format="json")
        assert answer.status_code == 202, answer.content
        ids.extend(e["id"] for e in answer.json()["events"])
        if start == 300:
            # Kill a worker while it sends: freeze it first, so what it holds is exactly
            # what is `delivering` now.
            wait_until(
                lambda: sum(len(r.requests) for r in receivers.values()) >= 100,
                timeout=60,
                message="nothing delivered",
            )
            os.killpg(workers[0].pid, signal.SIGSTOP)
            in_flight = set(
                Delivery.objects.filter(status="delivering").values_list("event_id", flat=True)
            )
            workers[0].kill_hard()

    wanted = {
        name: {i for i, e in zip(ids, events, strict=True) if _expected(name, e)}
        for name in FILTERS
    }
    assert all(40 < len(w) < EVENTS - 40 for w in wanted.values()), "a filter too loose/tight"
    wait_until(
        lambda: not Delivery.objects.exclude(status="succeeded").exists(),
        timeout=150,
        interval=0.5,
        message="not every delivery succeeded after a worker was killed",
    )
    for name, receiver in receivers.items():
        got = Counter(r.headers["webhook-id"] for r in receiver.requests)
        assert set(got) == wanted[name], f"{name}: events lost or strayed"
        assert set(got) - {i for i, n in got.items() if n == 1} <= in_flight  # resent: held
        sequences = {
            r.headers["webhook-id"]: int(r.headers["homing-sequence"]) for r in receiver.requests
        }
        assert sorted(sequences.values()) == list(range(1, len(wanted[name]) + 1)), name
        # Numbered in the order the events were accepted.
        in_order = [i for i in ids if i in wanted[name]]
        assert [sequences[i] for i in in_order] == list(range(1, len(in_order) + 1)), name
        assert Delivery.objects.filter(endpoint_id=endpoints[name]).count() == len(wanted[name])
