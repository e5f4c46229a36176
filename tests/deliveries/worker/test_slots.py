"""In-flight accounting: capacity in all, per tenant and per endpoint, given back exactly
once."""

from __future__ import annotations

import dataclasses
import itertools
import threading

from django.utils import timezone

from deliveries.lifecycle.in_hand import EventInHand, InHand
from deliveries.worker.slots import Slots

_ids = itertools.count(1)


def make(**kwargs) -> Slots:
    return Slots(**{"capacity": 10, "per_endpoint": 4, **kwargs})


def of_tenant(endpoint_ids: list[str], tenant: str = "t") -> list[InHand]:
    """Claimed deliveries to these endpoints."""
    event = EventInHand("evt_1", "a.b", None, timezone.now())
    return [
        InHand(
            id=f"dlv_{next(_ids)}", tenant_id=tenant, endpoint_id=e, event=event, attempt_count=1
        )
        for e in endpoint_ids
    ]


def test_it_reserves_at_most_the_free_capacity() -> None:
    slots = make()
    assert slots.reserve(6) == 6
    assert slots.reserve(6) == 4
    assert slots.reserve(1, timeout=0.05) == 0  # full: waits, then gives up
    assert slots.in_flight == 10


def test_admission_caps_each_endpoint_and_frees_unused_reservations() -> None:
    slots = make()
    reserved = slots.reserve(8)
    claimed = of_tenant(["a"] * 5 + ["b"])
    verdict = slots.admit(claimed, reserved)
    assert verdict == [True] * 4 + [False, True]
    # Nothing was claimed for two reservations: freed. The refused one keeps its slot
    # until the worker lines it up or gives it back.
    assert slots.in_flight == 6
    assert slots.full() == {"a"}
    assert (slots.room("a"), slots.room("b"), slots.room("c")) == (0, 3, 4)
    slots.free(claimed[4])
    assert slots.in_flight == 5


def test_an_endpoint_counts_as_answering_only_while_its_answers_come() -> None:
    slots = make()
    a = of_tenant(["a"] * 3 + ["b"])
    slots.admit(a, slots.reserve(4))
    assert not slots.answered("a", within=1.0)  # nothing answered yet
    slots.leave(a[0], answered=False)  # a timeout: the request is over, with no answer
    assert not slots.answered("a", within=1.0) and slots.open_to("a") == 2
    later = of_tenant(["a"])
    slots.admit(later, slots.reserve(1))
    slots.leave(later[0])
    assert slots.answered("a", within=1.0) and slots.open_to("a") == 2
    assert not slots.answered("a", within=0.0)  # not recently enough
    slots.withdraw("b")  # never started: not an answer
    assert not slots.answered("b", within=1.0) and slots.room("b") == 4
    slots.leave(a[1])
    slots.leave(a[2])  # nothing open any more: it still answered
    assert slots.answered("a", within=1.0) and slots.open_to("a") == 0


def test_a_slot_passed_on_stays_taken_and_counts_as_an_answer() -> None:
    woken = []
    slots = make(on_endpoint_room=lambda: woken.append(True))
    claimed = of_tenant(["a"] * 4)
    slots.admit(claimed, slots.reserve(4))
    slots.pass_on(claimed[0])
    assert slots.room("a") == 0 and slots.open_to("a") == 4 and slots.answered("a", within=1.0)
    assert woken == []  # no room came free: no claim to wake


def test_releasing_every_admitted_attempt_returns_to_idle() -> None:
    slots = make()
    claimed = of_tenant(["a", "a", "b"])
    slots.admit(claimed, slots.reserve(3))
    for delivery in reversed(claimed):
        slots.release(delivery)
    assert slots.in_flight == 0 and slots.full() == set() and slots.held() == []
    assert slots.wait_idle(timeout=0.01)


def test_an_endpoint_slot_is_free_when_the_request_ends_before_it_is_recorded() -> None:
    slots = make()
    claimed = of_tenant(["a"] * 4)
    slots.admit(claimed, slots.reserve(4))
    slots.leave(claimed[0])
    assert slots.room("a") == 1 and slots.in_flight == 4  # capacity waits for the record
    slots.free(claimed[0])
    assert slots.in_flight == 3


def test_every_finished_request_wakes_the_claims() -> None:
    woken = []
    slots = make(on_endpoint_room=lambda: woken.append(True))
    claimed = of_tenant(["a"] * 3)
    slots.admit(claimed, slots.reserve(3))
    slots.leave(claimed[0])
    slots.leave(claimed[1])
    assert woken == [True, True]


def test_a_cancelled_claim_gives_its_reservation_back() -> None:
    slots = make()
    slots.cancel(slots.reserve(10))
    assert slots.in_flight == 0


def test_a_waiting_reservation_is_granted_when_a_slot_is_released() -> None:
    slots = make(capacity=2)
    claimed = of_tenant(["a", "b"])
    slots.admit(claimed, slots.reserve(2))
    got = []
    waiter = threading.Thread(target=lambda: got.append(slots.reserve(5, timeout=5)))
    waiter.start()
    slots.release(claimed[0])
    waiter.join(timeout=5)
    assert got == [1]


def test_drain_waits_for_attempts_under_way() -> None:
    slots = make()
    claimed = of_tenant(["a"])
    slots.admit(claimed, slots.reserve(1))
    assert not slots.wait_idle(timeout=0.05)
    threading.Timer(0.05, slots.release, args=claimed).start()
    assert slots.wait_idle(timeout=5)


def test_a_tenant_s_room_counts_its_requests_under_way_and_its_line() -> None:
    slots = make(per_tenant=5)
    busy, quiet = of_tenant(["a"] * 5, "busy"), of_tenant(["q"], "quiet")
    verdict = slots.admit(busy + quiet, slots.reserve(6))
    # The endpoint cap refuses one of busy's, which still counts (in line).
    assert verdict == [True] * 4 + [False, True]
    assert (slots.tenant_room("busy"), slots.tenant_room("quiet")) == (0, 4)
    slots.pass_on(busy[0])  # its request is over; the one in line takes its place
    assert slots.tenant_room("busy") == 1
    slots.leave(busy[1])  # over, waiting for its record: out of the share already
    assert slots.tenant_room("busy") == 2 and slots.in_flight == 6
    slots.free(busy[1])  # recorded: counted once only
    assert slots.tenant_room("busy") == 2
    slots.free(busy[4])  # the one in line given back
    assert slots.tenant_room("busy") == 3
    slots.release(quiet[0])
    assert slots.tenant_room("quiet") == 5 and slots.in_flight == 3


def test_every_delivery_holding_a_slot_is_held_with_its_claim_s_attempt_number() -> None:
    slots = make()
    claimed = of_tenant(["a", "a", "b"])
    claimed[2] = dataclasses.replace(claimed[2], attempt_count=3)
    slots.admit(claimed, slots.reserve(5))
    assert sorted(slots.held()) == sorted([(d.id, d.attempt_count) for d in claimed])
    slots.leave(claimed[0])  # over, not recorded yet: still held (its lease is still needed)
    assert len(slots.held()) == 3
    slots.free(claimed[0])
    assert sorted(slots.held()) == sorted([(d.id, d.attempt_count) for d in claimed[1:]])
