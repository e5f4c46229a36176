"""The ledger: every delivery in hand has one entry that moves through its stages and ends
once, and every place it took, here and in the cluster-wide cap, comes back on every path.
With a fake cluster (no servers): only the ledger's public verbs and reads."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from django.utils import timezone

from deliveries.lifecycle.in_hand import EventInHand, InHand
from deliveries.worker.ledger import Ledger, Stage


class FakeCluster:
    """The cluster-wide cap: `cap` places per endpoint; records what comes back."""

    def __init__(self, cap: int = 10, broken: bool = False) -> None:
        self.cap, self.broken = cap, broken
        self.held: dict[str, set[str]] = {}
        self.renewed: list[tuple[str, str]] = []

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


def make(cluster: FakeCluster, per_endpoint: int = 4, **kwargs) -> Ledger[InHand]:
    return Ledger(capacity=20, per_endpoint=per_endpoint, per_tenant=12, cluster=cluster, **kwargs)


def claimed(*endpoint_ids: str, tenant: str = "t") -> list[InHand]:
    event = EventInHand("evt_1", "a.b", None, timezone.now())
    return [
        InHand(id=f"dlv_{n}_{e}", tenant_id=tenant, endpoint_id=e, event=event, attempt_count=1)
        for n, e in enumerate(endpoint_ids)
    ]


def unbounded(delivery: InHand, answered_ago: float, open_to: int) -> int:
    return 100


def idle(ledger: Ledger, cluster: FakeCluster) -> bool:
    ledger.send_releases(lease_seconds=60)
    return (
        ledger.in_hand == 0
        and ledger.held() == []
        and not ledger.stages()
        and ledger.open_to("a") == ledger.open_to("b") == 0
        and ledger.waiting("a") == 0
        and ledger.tenant_room("t") == ledger.per_tenant
        and not any(cluster.held.values())
    )


def test_admitted_attempts_hold_places_here_and_in_the_cluster_until_over() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    batch = claimed("a", "a", "b")
    going, refused = ledger.admit(batch, ledger.reserve(5), lease_seconds=60)
    assert going == batch and refused == []
    assert ledger.stages() == {Stage.IN_FLIGHT: 3}
    assert ledger.open_to("a") == 2 and cluster.held["a"] == {batch[0].id, batch[1].id}
    for delivery in batch:
        assert ledger.request_over(delivery, answered=True) is None  # nobody in line
    assert ledger.stages() == {Stage.RECORDING: 3} and ledger.in_hand == 3
    for delivery in batch:
        ledger.finish(delivery)
    assert idle(ledger, cluster)


def test_reservations_nothing_was_claimed_for_come_back_at_admission() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    reserved = ledger.reserve(10)
    assert ledger.in_hand == 10
    ledger.admit(claimed("a"), reserved, lease_seconds=60)
    assert ledger.in_hand == 1


def test_a_failed_claim_cancels_its_reservation() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    ledger.cancel(ledger.reserve(7))
    assert idle(ledger, cluster)


def test_a_reservation_waits_for_room_and_gets_it_when_an_entry_ends() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    batch = claimed(*["a"] * 2, *["b"] * 2, *["c"] * 2, *["d"] * 2, *["e"] * 2)
    ledger.admit(batch * 2, ledger.reserve(20), lease_seconds=60)  # ids repeat: 10 entries
    ledger.admit(claimed(*["f"] * 10, tenant="u"), ledger.reserve(10), lease_seconds=60)
    assert ledger.reserve(1, timeout=0) == 0  # full
    granted: list[int] = []
    waiter = threading.Thread(target=lambda: granted.append(ledger.reserve(5, timeout=10)))
    waiter.start()
    ledger.finish(batch[0])
    waiter.join(10)
    assert granted == [1]


def test_one_over_the_endpoint_cap_here_is_claimed_without_a_place() -> None:
    cluster = FakeCluster()
    ledger = make(cluster, per_endpoint=2)
    batch = claimed("a", "a", "a")
    going, refused = ledger.admit(batch, ledger.reserve(3), lease_seconds=60)
    assert (going, refused) == (batch[:2], batch[2:])
    assert batch[2].id not in cluster.held["a"] and ledger.in_hand == 3
    assert ledger.stages() == {Stage.IN_FLIGHT: 2, Stage.CLAIMED: 1}
    ledger.finish(batch[2])  # given back
    for delivery in going:
        ledger.finish(delivery)  # never started: its places come back
    assert idle(ledger, cluster)


def test_one_the_cluster_refuses_gives_its_endpoint_place_back_here() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    batch = claimed("a", "a")
    going, refused = ledger.admit(batch, ledger.reserve(2), lease_seconds=60)
    assert (going, refused) == (batch[:1], batch[1:])
    assert ledger.open_to("a") == 1  # the refused one's place is withdrawn
    ledger.finish(refused[0])
    ledger.request_over(going[0], answered=False)
    ledger.finish(going[0])
    assert idle(ledger, cluster)


def test_an_answer_hands_its_place_to_the_first_in_line_here_and_in_the_cluster() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    first, second, third = claimed("a", "a", "a")
    going, _ = ledger.admit([first, second, third], ledger.reserve(3), lease_seconds=60)
    assert going == [first]
    assert ledger.line_up([second, third], length=unbounded) == []
    assert ledger.waiting("a") == 2 and ledger.stages()[Stage.IN_LINE] == 2
    assert ledger.request_over(first, answered=True, max_wait=60) == second
    ledger.send_releases(lease_seconds=60)
    assert cluster.held["a"] == {second.id} and ledger.open_to("a") == 1
    assert ledger.waiting("a") == 1
    ledger.finish(first)  # recorded
    assert ledger.request_over(second, answered=True, max_wait=60) == third
    ledger.finish(second)
    assert ledger.request_over(third, answered=True, max_wait=60) is None
    ledger.finish(third)
    assert idle(ledger, cluster)


def test_a_failure_does_not_hand_over_and_the_line_waits() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    first, second = claimed("a", "a")
    ledger.admit([first, second], ledger.reserve(2), lease_seconds=60)
    ledger.line_up([second], length=unbounded)
    assert ledger.request_over(first, answered=False, max_wait=60) is None
    assert ledger.open_to("a") == 0 and ledger.waiting("a") == 1
    assert not ledger.answered("a", within=60)  # a failure is no answer
    assert ledger.leave_lines(waited=0) == [second]
    ledger.finish(second)
    ledger.finish(first)
    assert idle(ledger, cluster)


def test_one_that_waited_too_long_is_not_handed_a_place_but_left_to_be_given_back() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    first, second = claimed("a", "a")
    ledger.admit([first, second], ledger.reserve(2), lease_seconds=60)
    ledger.line_up([second], length=unbounded)
    assert ledger.request_over(first, answered=True, max_wait=0) is None
    assert ledger.leave_lines(waited=0) == [second]
    assert ledger.stages() == {Stage.RECORDING: 1, Stage.CLAIMED: 1}


def test_each_endpoint_has_its_own_line_first_in_first_out() -> None:
    cluster = FakeCluster(cap=0)
    ledger = make(cluster)
    batch = claimed("a", "b", "a", "b")
    _, refused = ledger.admit(batch, ledger.reserve(4), lease_seconds=60)
    ledger.line_up(refused, length=unbounded)
    assert [ledger.waiting("a"), ledger.waiting("b")] == [2, 2]
    assert ledger.leave_lines(waited=0) == [batch[0], batch[2], batch[1], batch[3]]


def test_a_line_takes_what_its_length_allows_and_the_rest_is_given_back() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    batch = claimed("a", "a", "a", "a", "b", "b")
    going, refused = ledger.admit(batch, ledger.reserve(6), lease_seconds=60)
    assert going == [batch[0], batch[4]]
    asked = []

    def length(delivery: InHand, answered_ago: float, open_to: int) -> int:
        asked.append((delivery.endpoint_id, answered_ago, open_to))
        return 2 if delivery.endpoint_id == "a" else 0

    # One already waits at "a": one more joins it, the third goes back, as does "b"'s.
    assert ledger.line_up([refused[0]], length=unbounded) == []
    assert ledger.line_up(refused[1:], length=length) == [batch[3], batch[5]]
    assert [ledger.waiting("a"), ledger.waiting("b")] == [2, 0]
    assert asked == [("a", float("inf"), 1), ("b", float("inf"), 1)]  # once per endpoint
    assert ledger.request_over(batch[0], answered=True, max_wait=60) == batch[1]
    ledger.line_up([batch[3]], length=length)
    assert asked[-1][0] == "a" and asked[-1][1] < 60  # it answered just now
    assert ledger.waiting("a") == 2


def test_finishing_one_in_line_takes_it_out_of_its_line() -> None:
    cluster = FakeCluster(cap=0)
    ledger = make(cluster)
    first, second = claimed("a", "a")
    ledger.admit([first, second], ledger.reserve(2), lease_seconds=60)
    ledger.line_up([first, second], length=unbounded)
    ledger.finish(first)
    assert ledger.waiting("a") == 1
    ledger.finish(second)
    assert idle(ledger, cluster)


def test_a_cluster_that_cannot_be_asked_leaves_nothing_in_hand() -> None:
    cluster = FakeCluster(broken=True)
    ledger = make(cluster, per_endpoint=1)
    with pytest.raises(RuntimeError):
        ledger.admit(claimed("a", "a", "b"), ledger.reserve(5), lease_seconds=60)
    assert idle(ledger, cluster)


def test_a_tenant_s_room_comes_back_as_its_requests_end() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    batch = claimed("a", "b", tenant="busy")
    ledger.admit(batch, ledger.reserve(2), lease_seconds=60)
    assert ledger.tenant_room("busy") == ledger.per_tenant - 2
    ledger.request_over(batch[0], answered=True)
    # Over, its record to come: out of the tenant's share, still holding its capacity.
    assert ledger.tenant_room("busy") == ledger.per_tenant - 1
    assert ledger.in_hand == 2
    ledger.finish(batch[0])
    ledger.finish(batch[1])
    assert ledger.tenant_room("busy") == ledger.per_tenant
    assert ledger.in_hand == 0


def test_a_tenant_s_room_counts_its_requests_under_way_and_its_line() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    batch = claimed("a", "a", "a", tenant="busy")
    _, refused = ledger.admit(batch, ledger.reserve(3), lease_seconds=60)
    ledger.line_up([refused[0]], length=unbounded)
    assert ledger.tenant_room("busy") == ledger.per_tenant - 3  # claimed and in line count


def test_the_places_renewed_are_those_of_the_requests_in_flight() -> None:
    cluster = FakeCluster(cap=2)
    ledger = make(cluster)
    first, second, third, other = claimed("a", "a", "a", "b")
    ledger.admit([first, second, third, other], ledger.reserve(4), lease_seconds=60)
    ledger.line_up([third], length=unbounded)  # third was refused (the cluster's cap is 2)
    assert ledger.request_over(first, answered=True, max_wait=60) == third
    ledger.request_over(other, answered=True)
    ledger.renew_places(lease_seconds=60)
    assert cluster.renewed == sorted([("a", second.id), ("a", third.id)])


def test_every_delivery_in_hand_is_held_with_its_claim_s_attempt_number() -> None:
    cluster = FakeCluster(cap=1)
    ledger = make(cluster)
    batch = claimed("a", "a")
    ledger.admit(batch, ledger.reserve(2), lease_seconds=60)
    assert sorted(ledger.held()) == sorted((d.id, 1) for d in batch)


def test_an_ended_request_and_a_never_started_one_wake_the_claims() -> None:
    rings: list[str] = []
    cluster = FakeCluster()
    ledger = make(cluster, on_endpoint_room=lambda: rings.append("ring"))
    first, second = claimed("a", "a")
    ledger.admit([first, second], ledger.reserve(2), lease_seconds=60)
    ledger.request_over(first, answered=True)
    ledger.finish(second)  # never started
    assert rings == ["ring", "ring"]


def test_the_endpoint_cap_follows_the_workers_sharing_it() -> None:
    cluster = FakeCluster()
    ledger = make(cluster, per_endpoint=4)
    ledger.set_endpoint_cap(1)
    going, refused = ledger.admit(claimed("a", "a"), ledger.reserve(2), lease_seconds=60)
    assert len(going) == len(refused) == 1
    assert ledger.room("a") == 0 and ledger.moving("a", within=60) is False


def test_drain_waits_for_every_entry_to_end() -> None:
    cluster = FakeCluster()
    ledger = make(cluster)
    (only,) = claimed("a")
    ledger.admit([only], ledger.reserve(1), lease_seconds=60)
    assert not ledger.wait_idle(0.01)
    threading.Timer(0.05, ledger.finish, [only]).start()
    assert ledger.wait_idle(10)
