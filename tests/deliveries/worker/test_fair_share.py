"""Fair share between tenants: how a claim deals its rows out (pure)."""

from __future__ import annotations

from deliveries.worker.fair_share import DueEndpoint, fair_shares


def due_endpoints_of(tenant: str, count: int) -> list[DueEndpoint]:
    return [DueEndpoint(f"{tenant}-{n}", tenant) for n in range(count)]


def test_a_quiet_tenant_gets_a_row_however_many_endpoints_the_busy_one_has() -> None:
    due = due_endpoints_of("busy", 20) + due_endpoints_of("quiet", 1)
    shares = fair_shares(limit=10, endpoints=due, room=lambda e: 50)
    assert shares["quiet-0"] == 5  # half the claim: one of two tenants
    assert sum(shares.values()) == 10 and max(shares.values()) == 5


def test_rows_are_dealt_between_tenants_then_between_their_endpoints() -> None:
    due = due_endpoints_of("a", 2) + due_endpoints_of("b", 1)
    shares = fair_shares(limit=6, endpoints=due, room=lambda e: 50)
    assert shares == {"a-0": 2, "a-1": 1, "b-0": 3}


def test_an_endpoint_never_gets_more_than_its_room_and_the_rest_goes_elsewhere() -> None:
    due = due_endpoints_of("a", 2) + due_endpoints_of("b", 1)
    room = {"a-0": 0, "a-1": 1, "b-0": 2}
    shares = fair_shares(limit=100, endpoints=due, room=lambda e: room[e.id])
    assert shares == {"a-1": 1, "b-0": 2}


def test_the_rotation_moves_the_first_tenant_on_when_rows_run_out_first() -> None:
    due = due_endpoints_of("a", 1) + due_endpoints_of("b", 1) + due_endpoints_of("c", 1)
    served = [
        next(iter(fair_shares(limit=1, endpoints=due, room=lambda e: 5, rotation=r)))
        for r in range(3)
    ]
    assert served == ["a-0", "b-0", "c-0"]


def test_nothing_due_or_no_room_shares_nothing() -> None:
    assert fair_shares(limit=10, endpoints=[], room=lambda e: 5) == {}
    assert fair_shares(limit=10, endpoints=due_endpoints_of("a", 3), room=lambda e: 0) == {}


def test_a_tenant_never_gets_more_than_its_room_and_the_rest_goes_to_others() -> None:
    due = due_endpoints_of("slow", 10) + due_endpoints_of("quiet", 1)
    room = {"slow": 3, "quiet": 50}
    shares = fair_shares(limit=100, endpoints=due, room=lambda e: 50, tenant_room=lambda t: room[t])
    assert sum(n for e, n in shares.items() if e.startswith("slow")) == 3
    assert shares["quiet-0"] == 50


def test_a_tenant_without_room_is_not_asked_at_all() -> None:
    due = due_endpoints_of("full", 2) + due_endpoints_of("quiet", 1)
    shares = fair_shares(
        limit=10, endpoints=due, room=lambda e: 5, tenant_room=lambda t: 0 if t == "full" else 9
    )
    assert shares == {"quiet-0": 5}
