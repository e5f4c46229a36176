"""The endpoints with deliveries due, as the claim loop sees them.

Looked up (claims.due_endpoints: one index probe per endpoint with pending deliveries)
at most every REFRESH_SECONDS, so a claim costs no search for work. Past
DUE_ENDPOINTS_LIMIT endpoints with work due, each look goes on where the last ended.
An endpoint a claim found with fewer due rows than it asked for is left out until the
next look: nothing more is due there for now. Work that becomes due meanwhile waits at
most REFRESH_SECONDS (a wake-up message makes the next claim look at once).
"""

from __future__ import annotations

import time
from collections.abc import Collection

from deliveries.lifecycle.partitions import EVERY_PARTITION, ClaimBounds
from deliveries.worker.claims import DUE_ENDPOINTS_LIMIT, due_endpoints
from deliveries.worker.fair_share import DueEndpoint

REFRESH_SECONDS = 0.2


class DueEndpoints:
    def __init__(self, refresh_seconds: float = REFRESH_SECONDS) -> None:
        self._refresh_seconds = refresh_seconds
        self._endpoints: list[DueEndpoint] = []
        self._looked_at = float("-inf")
        self._after = ""  # a full list ended here: the next look goes on from it

    def current(self, *, bounds: ClaimBounds = EVERY_PARTITION) -> list[DueEndpoint]:
        """`bounds`: the delivery ids to look between (claims.due_endpoints)."""
        if time.monotonic() - self._looked_at >= self._refresh_seconds:
            self._endpoints = due_endpoints(after=self._after, bounds=bounds)
            full = len(self._endpoints) == DUE_ENDPOINTS_LIMIT
            self._after = self._endpoints[-1].id if full else ""
            self._looked_at = time.monotonic()
        return self._endpoints

    def look_again(self) -> None:
        """The next `current()` looks in the database (a wake-up message came)."""
        self._looked_at = float("-inf")

    def exhausted(self, endpoint_ids: Collection[str]) -> None:
        if endpoint_ids:
            self._endpoints = [e for e in self._endpoints if e.id not in endpoint_ids]
