"""The ledger: every place an attempt takes, here and in the cluster-wide cap, is given
back exactly once on every path. With a fake cluster (no servers)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from django.utils import timezone

from deliveries.lifecycle.in_hand import EventInHand, InHand
from deliveries.worker.ledger import Ledger
from deliveries.worker.releases import Releases
from deliveries.worker.slots import Slots


class FakeCluster:
    """The cluster-wide cap: `cap` places per endpoint; records what comes back."""

    def __init__(self, cap: int = 10, broken: bool = False) -> None:
        self.cap, self.broken = cap, broken
        self.held: dict[str, set[str]] = {}

    def acquire(
        self, *, endpoint_ids: Sequence[str], delivery_ids: Sequence[str], lease_seconds: float
    ) -> list[bool]:
        if self.broken:
            raise RuntimeError("the cap cannot be asked")
        verdict = []
        for endpoint_id, delivery_id in zip(endpoint_ids, delivery_ids, strict=True):
            held = self.held.setdefault(endpoint_id, set())
            verdict.append(len(held) < self.cap)
            if verdict[-1]:
                held.add(delivery_id)
        return verdict

    def rooms(self, *, endpoint_ids: Sequence[str]) -> dict[str, int]:
        return {e: self.cap - len(self.held.get(e, ())) for e in endpoint_ids}

    def hand_over(self, *, handed: Sequence[tuple[str, str, str]], lease_seconds: float) -> None:
        for endpoint_id, finished, successor in handed:
            self.held[endpoint_id].discard(finished)
            self.held[endpoint_id].add(successor)

    def release_many(self, *, finished: Sequence[tuple[str, str]]) -> None:
        for endpoint_id, delivery_id in finished:
            self.held.get(endpoint_id, set()).discard(delivery_id)

    def workers_sending(self, *, worker: str, sending: bool = True, within: float = 10.0) -> int:
        return 1

    def renew(self, *, held: Sequence[tuple[str, str]], lease_seconds: float) -> None:
        self.renewed = sorted(held)


def make(cluster: FakeCluster, per_endpoint: int = 4) -> Ledger:
    slots = Slots(capacity=20, per_endpoint=per_endpoint, per_tenant=12)
    return Ledger(slots, Releases(lease_seconds=lambda: 60, cluster=cluster), cluster)


def claimed(*endpoint_ids: str, tenant: str = "t") -> list[InHand]:
    event = EventInHand("evt_1", "a.b", None, timezone.now())
    return [
        InHand(id=f"dlv_{n}_{e}", tenant_id=tenant, endpoint_id=e, event=event, attempt_count=1)
        for n, e in enumerate(endpoint_ids)
    ]


def idle(ledger: Ledger, cluster: FakeCluster) -> bool:
    ledger.releases.send()
    slots = ledger.slots
    return (
        slots.in_flight == 0
        and slots.held() == []
        and slots.open_to("a") == slots.open_to("b") == 0
        and slots.tenant_room("t") == slots.per_tenant
        and not any(cluster.held.values())
    )


def test_admitted_attempts_hold_places_here_and_in_the_cluster_until_over() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    batch = claimed("a", "a", "b")
    admitted, refused = ledger.admit(batch, ledger.slots.reserve(5), lease_seconds=60)
    assert admitted == batch and refused == []
    assert ledger.slots.open_to("a") == 2 and cluster.held["a"] == {batch[0].id, batch[1].id}
    for delivery in batch:
        ledger.request_over(delivery, answered=True)
        ledger.finish(delivery)
    assert idle(ledger, cluster)


def test_one_over_the_endpoint_cap_here_keeps_only_its_capacity_slot() -> None:
    cluster = FakeCluster()
    ledger = make(cluster, per_endpoint=2)
    batch = claimed("a", "a", "a")
    admitted, refused = ledger.admit(batch, ledger.slots.reserve(3), lease_seconds=60)
    assert (admitted, refused) == (batch[:2], batch[2:])
    assert batch[2].id not in cluster.held["a"] and ledger.slots.in_flight == 3
    ledger.finish(batch[2])  # given back
    for delivery in admitted:
        ledger.release(delivery)  # never started
    assert idle(ledger, cluster)


def test_one_the_cluster_refuses_gives_its_endpoint_place_back_here() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    batch = claimed("a", "a")
    admitted, refused = ledger.admit(batch, ledger.slots.reserve(2), lease_seconds=60)
    assert (admitted, refused) == (batch[:1], batch[1:])
    assert ledger.slots.open_to("a") == 1  # the refused one's place is withdrawn
    ledger.finish(refused[0])
    ledger.request_over(admitted[0], answered=False)
    ledger.finish(admitted[0])
    assert idle(ledger, cluster)


def test_a_hand_over_keeps_the_endpoint_s_places_and_moves_the_cluster_s() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    first, second = claimed("a", "a")
    ledger.admit([first, second], ledger.slots.reserve(2), lease_seconds=60)  # second in line
    ledger.hand_over(first, second)
    ledger.releases.send()
    assert cluster.held["a"] == {second.id} and ledger.slots.open_to("a") == 1
    ledger.finish(first)
    ledger.request_over(second, answered=True)
    ledger.finish(second)
    assert idle(ledger, cluster)


def test_a_cluster_that_cannot_be_asked_leaves_nothing_counted() -> None:
    cluster = FakeCluster(broken=True)
    ledger = make(cluster, per_endpoint=1)
    with pytest.raises(RuntimeError):
        ledger.admit(claimed("a", "a", "b"), ledger.slots.reserve(5), lease_seconds=60)
    assert idle(ledger, cluster)


def test_a_tenant_s_room_comes_back_as_its_requests_end() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    batch = claimed("a", "b", tenant="busy")
    ledger.admit(batch, ledger.slots.reserve(2), lease_seconds=60)
    assert ledger.slots.tenant_room("busy") == ledger.slots.per_tenant - 2
    ledger.request_over(batch[0], answered=True)
    # Over, its record to come: out of the tenant's share, still holding its capacity.
    assert ledger.slots.tenant_room("busy") == ledger.slots.per_tenant - 1
    assert ledger.slots.in_flight == 2
    ledger.finish(batch[0])
    ledger.release(batch[1])
    assert ledger.slots.tenant_room("busy") == ledger.slots.per_tenant
    assert ledger.slots.in_flight == 0


def test_the_places_renewed_are_those_of_the_requests_under_way() -> None:
    cluster = FakeCluster(cap=2)
    ledger = make(cluster)
    first, second, third, other = claimed("a", "a", "a", "b")
    ledger.admit([first, second, third, other], ledger.slots.reserve(4), lease_seconds=60)
    ledger.hand_over(first, third)  # third was in line (the cluster's cap is 2)
    ledger.request_over(other, answered=True)
    ledger.renew_places(lease_seconds=60)
    assert cluster.renewed == sorted([("a", second.id), ("a", third.id)])
