"""Fair share between tenants: how one claim divides its rows among due endpoints.

A claim no longer takes the oldest due rows wherever they are: one tenant's backlog,
however deep and on however many endpoints, would then stand in front of every other
tenant's new event (CONTRACT section 4). It deals rows out round-robin, one per tenant
per round and, within a tenant, one per endpoint per round, never past an endpoint's
room (what it may still have in flight, or send within its rate limit) nor past its
tenant's room (HOMING_TENANT_SHARE of the worker's capacity). A tenant with one
due delivery gets it into the very next claim, whatever the others have queued.

Pure: no database, no Redis. The rotation moves the first tenant on at every claim, so
that when the rows run out before the tenants do, nobody is always last.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DueEndpoint:
    """An endpoint with deliveries due now and a closed circuit."""

    id: str
    tenant_id: str
    rate_limit: int | None = None


def fair_shares(
    *,
    limit: int,
    endpoints: Sequence[DueEndpoint],
    room: Callable[[DueEndpoint], int],
    rotation: int = 0,
    tenant_room: Callable[[str], int] | None = None,
) -> dict[str, int]:
    """How many rows to claim from each endpoint: at most `limit` in all, at most
    `room(endpoint)` each and `tenant_room(tenant)` per tenant, dealt round-robin
    between tenants then between endpoints."""
    rooms = {e.id: room(e) for e in endpoints}
    # Asked once per tenant, not per endpoint: a claim may see thousands of endpoints.
    tenant_left = {
        t: limit if tenant_room is None else tenant_room(t)
        for t in {e.tenant_id for e in endpoints}
    }
    # Per tenant, its endpoints with room left, in turn: take the first, put it back last.
    queues: dict[str, deque[DueEndpoint]] = {}
    for endpoint in endpoints:
        if rooms[endpoint.id] > 0 and tenant_left[endpoint.tenant_id] > 0:
            queues.setdefault(endpoint.tenant_id, deque()).append(endpoint)
    if not queues:
        return {}
    order = list(queues.values())
    start = rotation % len(order)
    tenants = deque(order[start:] + order[:start])
    shares: dict[str, int] = {}
    left = limit
    while left > 0 and tenants:
        turn = tenants.popleft()
        endpoint = turn.popleft()
        shares[endpoint.id] = shares.get(endpoint.id, 0) + 1
        left -= 1
        tenant_left[endpoint.tenant_id] -= 1
        if shares[endpoint.id] < rooms[endpoint.id]:
            turn.append(endpoint)
        if turn and tenant_left[endpoint.tenant_id] > 0:
            tenants.append(turn)
    return shares
