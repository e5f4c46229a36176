"""The planner: how much one claim asks of each due endpoint. Pure: plain values only."""

from __future__ import annotations

from dataclasses import dataclass, field

from deliveries.worker.fair_share import DueEndpoint
from deliveries.worker.planner import (
    ANSWERING_SECONDS,
    BATCH_SIZE,
    LINE_PER_REQUEST,
    claim_shares,
    endpoint_cap,
    line_length,
    rate_room,
    tenant_cap,
)


@dataclass
class Counts:
    """The ledger's counts as the planner reads them."""

    per_endpoint: int = 10
    open: dict[str, int] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    answering: set[str] = field(default_factory=set)
    tenant_rooms: dict[str, int] = field(default_factory=dict)

    def room(self, endpoint_id: str) -> int:
        return max(0, self.per_endpoint - self.open.get(endpoint_id, 0))

    def open_to(self, endpoint_id: str) -> int:
        return self.open.get(endpoint_id, 0)

    def waiting(self, endpoint_id: str) -> int:
        return self.lines.get(endpoint_id, 0)

    def tenant_room(self, tenant_id: str) -> int:
        return self.tenant_rooms.get(tenant_id, 1000)

    def answered(self, endpoint_id: str, *, within: float) -> bool:
        return endpoint_id in self.answering


def cluster(rooms: dict[str, int], asked: list[list[str]] | None = None):
    def answer(endpoint_ids: list[str]) -> dict[str, int]:
        if asked is not None:
            asked.append(sorted(endpoint_ids))
        return {e: rooms.get(e, 1000) for e in endpoint_ids}

    return answer


def test_an_endpoint_takes_at_most_its_room_here_and_in_the_cluster() -> None:
    due = [DueEndpoint("a", "alice"), DueEndpoint("b", "alice")]
    counts = Counts(per_endpoint=10, open={"a": 7})
    shares = claim_shares(
        limit=100, due=due, counts=counts, cluster_rooms=cluster({"b": 4}), rotation=0
    )
    assert shares == {"a": 3, "b": 4}


def test_tenants_share_a_claim_fairly_whatever_their_backlogs() -> None:
    due = [DueEndpoint(f"a{n}", "alice") for n in range(5)] + [DueEndpoint("b0", "bob")]
    shares = claim_shares(limit=10, due=due, counts=Counts(), cluster_rooms=cluster({}), rotation=0)
    assert shares["b0"] == 5 and sum(shares.values()) == 10


def test_the_cluster_is_asked_once_and_only_for_the_endpoints_a_share_went_to() -> None:
    due = [DueEndpoint("a", "alice"), DueEndpoint("skip", "alice"), DueEndpoint("b", "bob")]
    asked: list[list[str]] = []
    claim_shares(
        limit=10,
        due=due,
        counts=Counts(),
        cluster_rooms=cluster({}, asked),
        rotation=0,
        skip={"skip"},
    )
    assert asked == [["a", "b"]]


def test_an_answering_endpoint_gets_a_line_behind_every_request_open_to_it() -> None:
    due = [DueEndpoint("a", "alice")]
    counts = Counts(per_endpoint=2, open={"a": 2}, answering={"a"})
    shares = claim_shares(limit=100, due=due, counts=counts, cluster_rooms=cluster({}), rotation=0)
    assert shares == {"a": LINE_PER_REQUEST * 2}  # no room now: a line for the answers
    counts.lines["a"] = LINE_PER_REQUEST * 2
    assert (
        claim_shares(limit=100, due=due, counts=counts, cluster_rooms=cluster({}), rotation=0) == {}
    )


def test_a_silent_or_rate_limited_endpoint_gets_no_line() -> None:
    assert line_length(rate_limit=None, answered_ago=float("inf"), open_to=2) == 0
    assert line_length(rate_limit=None, answered_ago=ANSWERING_SECONDS, open_to=2) == 0
    answering = line_length(rate_limit=None, answered_ago=0.1, open_to=2)
    assert answering == LINE_PER_REQUEST * 2  # one behind each request open to it
    assert line_length(rate_limit=5, answered_ago=0.1, open_to=2) == 0  # spacing decides


def test_what_an_earlier_claim_of_the_round_took_is_left_out() -> None:
    due = [DueEndpoint("a", "alice"), DueEndpoint("b", "bob")]
    shares = claim_shares(
        limit=100,
        due=due,
        counts=Counts(per_endpoint=10, tenant_rooms={"bob": 6}),
        cluster_rooms=cluster({}),
        rotation=0,
        taken={"a": 4},
        tenants_taken={"bob": 5},
    )
    assert shares == {"a": 6, "b": 1}


def test_a_rate_limited_endpoint_gets_what_goes_within_the_hold() -> None:
    assert rate_room(DueEndpoint("a", "t", rate_limit=10)) == 18  # 10/s * 2 s / 1.1
    assert rate_room(DueEndpoint("a", "t")) == BATCH_SIZE


def test_caps_share_an_endpoint_between_workers_and_keep_room_for_other_tenants() -> None:
    assert endpoint_cap(capacity=400, cluster_cap=50) == 50
    assert endpoint_cap(capacity=400, cluster_cap=50, workers=2) == 25
    assert endpoint_cap(capacity=400, cluster_cap=50, workers=3) == 17  # rounded up
    assert endpoint_cap(capacity=20, cluster_cap=50) == 10  # half the capacity at most
    assert tenant_cap(capacity=400, share=0.5) == 200
    assert tenant_cap(capacity=1, share=0.5) == 1
