"""How much one claim asks of each due endpoint, and where its refused deliveries wait.

Pure: no database, no Redis, no threads. It reads the ledger's counts (through
`Counts`) and the cluster's rooms (a callable the claim loop answers with one Redis
round trip), so its rules are tested with plain values.

The rules, each with the measurement that set it:
- an endpoint's cap in one process is half the capacity (a hanging endpoint leaves the
  other half to everyone else) and this process's part of HOMING_ENDPOINT_CONCURRENCY;
- a tenant holds at most HOMING_TENANT_SHARE of the capacity (CONTRACT section 5);
- at an endpoint that answered with a success within ANSWERING_SECONDS and has no rate
  limit, a claim may take LINE_PER_REQUEST deliveries ahead per request of ours open to
  it: each answer hands its place to one, with no claim between two requests;
- a rate-limited endpoint gets at most what may go within RATE_HOLD_SECONDS.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from deliveries.worker.fair_share import DueEndpoint, fair_shares
from deliveries.worker.rate_limits import SPACING_MARGIN

# Deliveries one claim takes at most. Each claim, load and recorder transaction has a
# fixed cost, so larger batches are cheaper per delivery: measured with `make bench`
# (2 workers, one endpoint), 50 drained ~1,290/s and 100 ~1,350-1,430/s; 150 no better.
BATCH_SIZE = 100
# A claim waits until at least this many slots are free: not a claim per freed slot.
MIN_RESERVATION = 10
# A rate-limited attempt whose send time is at most this far off is held in memory until
# then (well within its lease); later ones are given back without spending an attempt.
RATE_HOLD_SECONDS = 2.0
# One endpoint at the default cap of 50: a freed place otherwise sat ~15 ms until the
# next claim took it, and one worker drained 969/s instead of 1,330-1,540/s. Four, not
# two: with two workers sharing one endpoint (25 places each) a line of two per request
# ran dry between claims (~30 ms apart): 3,280-3,301/s against 3,312-3,817/s. Only after
# a success: a failing endpoint's circuit may be opening, and an open circuit sends only
# probes (handed over after 503s, a line of 100 went out after it opened).
ANSWERING_SECONDS = 0.5
LINE_PER_REQUEST = 4


class Counts(Protocol):
    """What the planner reads of the ledger."""

    def room(self, endpoint_id: str) -> int: ...

    def open_to(self, endpoint_id: str) -> int: ...

    def waiting(self, endpoint_id: str) -> int: ...

    def tenant_room(self, tenant_id: str) -> int: ...

    def answered(self, endpoint_id: str, *, within: float) -> bool: ...


def endpoint_cap(*, capacity: int, cluster_cap: int, workers: int = 1) -> int:
    """Attempts one endpoint may have in flight in one process: half the capacity, and
    this process's part of the cluster-wide cap among the `workers` sending. (Whoever took
    an endpoint's places first kept them: with two workers draining one endpoint, one
    held nearly all 50 and ran at its CPU's limit while the other idled; shared 25 and
    25, the drain rose from ~2,000/s to ~2,500-2,900/s.)"""
    share = -(-cluster_cap // max(1, workers))  # rounded up
    return max(1, min(capacity // 2, share))


def tenant_cap(*, capacity: int, share: float) -> int:
    """Capacity one tenant's deliveries may hold in one process, so the rest is free when
    another tenant's work comes, however slow the first tenant's endpoints are."""
    return max(1, int(capacity * share))


def lines_up(counts: Counts, endpoint_id: str, rate_limit: int | None) -> bool:
    """Whether deliveries may wait in line at an endpoint: it answers with successes, and
    no rate limit spaces its requests (the spacing decides when they go)."""
    return not rate_limit and counts.answered(endpoint_id, within=ANSWERING_SECONDS)


def line_length(*, rate_limit: int | None, answered_ago: float, open_to: int) -> int:
    """How many claimed deliveries refused a place may wait in line at an endpoint (the
    others are given back): LINE_PER_REQUEST per request of ours open to it, where
    deliveries line up at all (`lines_up`: it answered with a success `answered_ago`
    seconds ago, within ANSWERING_SECONDS, and no rate limit spaces its requests)."""
    if rate_limit or answered_ago >= ANSWERING_SECONDS:
        return 0
    return LINE_PER_REQUEST * open_to


def rate_room(endpoint: DueEndpoint) -> int:
    """How many of the endpoint's deliveries one claim takes at most: with a rate limit,
    what may be sent within RATE_HOLD_SECONDS (the rest would only be given back)."""
    if not endpoint.rate_limit:
        return BATCH_SIZE
    return max(1, int(endpoint.rate_limit * RATE_HOLD_SECONDS / SPACING_MARGIN))


def claim_shares(
    *,
    limit: int,
    due: Sequence[DueEndpoint],
    counts: Counts,
    cluster_rooms: Callable[[list[str]], Mapping[str, int]],
    rotation: int,
    taken: Mapping[str, int] | None = None,
    tenants_taken: Mapping[str, int] | None = None,
    skip: Collection[str] = (),
) -> dict[str, int]:
    """Rows to claim per endpoint: dealt fairly once (fair_share.py) by what this process
    may still open to each endpoint, then each share cut to what the cluster lets go now
    plus, at an answering endpoint, a line behind every request of ours open to it.
    `taken` and `tenants_taken`: what an earlier claim of the same round took."""
    taken = taken or {}
    tenants_taken = tenants_taken or {}
    candidates = [e for e in due if e.id not in skip]

    def here(endpoint: DueEndpoint) -> int:
        if lines_up(counts, endpoint.id, endpoint.rate_limit):
            room = rate_room(endpoint)  # the cluster's answer and the line decide below
        else:
            room = min(counts.room(endpoint.id), rate_room(endpoint))
        return room - taken.get(endpoint.id, 0)

    wanted = fair_shares(
        limit=limit,
        endpoints=candidates,
        room=here,
        rotation=rotation,
        tenant_room=lambda t: counts.tenant_room(t) - tenants_taken.get(t, 0),
    )
    if not wanted:
        return {}
    cluster = cluster_rooms(list(wanted))
    by_id = {e.id: e for e in candidates}
    shares = {}
    for endpoint_id, share in wanted.items():
        endpoint = by_id[endpoint_id]
        going = min(counts.room(endpoint_id), cluster.get(endpoint_id, 0))
        ahead = 0
        if lines_up(counts, endpoint_id, endpoint.rate_limit):
            open_then = counts.open_to(endpoint_id) + going
            ahead = max(0, LINE_PER_REQUEST * open_then - counts.waiting(endpoint_id))
        room = min(going + ahead, rate_room(endpoint)) - taken.get(endpoint_id, 0)
        if min(share, room) > 0:
            shares[endpoint_id] = min(share, room)
    return shares
