"""Which active endpoints of a tenant take an event type, cached in each process.

Reading a tenant's active endpoints before every ingestion cost a round trip and ~9% of
the web process's CPU per event. The cache may never route to an endpoint deleted or
deactivated, however recently and from whichever process, so it is checked by the
insert itself:

1. Every endpoint change that alters routing (insert, delete, `is_active`, `event_types`)
   sets the tenant's `RoutingVersion` in its own transaction, by triggers on the endpoint
   table (migration 0006): the worker's deactivation, the admin and raw SQL included.
   The number comes from a sequence, so a rolled-back change's number is never current.
2. The routing and its version are read together, in one statement (one snapshot).
3. The ingest statement writes its events only while the tenant's version is still the
   one it routed with (the `gate` of ingest_sql.INGEST_GATED); otherwise it fails with
   `RoutingChanged` and the caller reads the routing again and retries.

PostgreSQL only: the ORM path of other databases reads the endpoints every time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import IntegrityError, connection

from core.exceptions import HomingError
from deliveries.intake.ingest_sql import ROUTING
from webhooks.models import Endpoint, Event

CACHE_TENANTS = 10_000  # tenants remembered per process; past it the cache starts over
CACHE_TYPES = 1_000  # event types remembered per tenant routing


@dataclass
class Routing:
    """A tenant's active endpoints (id and event_types only) as of `version`."""

    version: int
    endpoints: tuple[Endpoint, ...]
    _targets: dict[str, tuple[Endpoint, ...]] = field(default_factory=dict, repr=False)

    def targets(self, event_type: str, *, exclude: str | None = None) -> tuple[Endpoint, ...]:
        """The endpoints that take `event_type`, in a stable order (shared: read only)."""
        found = self._targets.get(event_type)
        if found is None:
            found = tuple(e for e in self.endpoints if e.matches(event_type))
            if len(self._targets) < CACHE_TYPES:
                self._targets[event_type] = found
        return found if exclude is None else tuple(e for e in found if e.pk != exclude)


class RoutingChanged(HomingError):
    """An endpoint kept changing while the routing was read: nothing was written, and
    the request may simply be sent again (a JSON 503, not a server error)."""

    status_code = 503


_cache: dict[str, Routing] = {}


def routing_cached(*, tenant_id: str) -> Routing | None:
    return _cache.get(tenant_id)


def routing_load(*, tenant_id: str) -> Routing:
    """The tenant's routing as the database has it now, remembered for the next call."""
    with connection.cursor() as cursor:
        cursor.execute(ROUTING, {"tenant_id": tenant_id})
        rows = cursor.fetchall()
    routing = Routing(
        version=rows[0][0],
        endpoints=tuple(
            Endpoint(id=pk, event_types=json.loads(types) if isinstance(types, str) else types)
            for _, pk, types in rows
            if pk is not None
        ),
    )
    if len(_cache) >= CACHE_TENANTS:
        _cache.clear()
    _cache[tenant_id] = routing
    return routing


def routing_changed(error: IntegrityError) -> bool:
    """Whether this error says the routing changed under the statement (not another
    fault): the gate of ingest_sql.INGEST_GATED closing, or an endpoint deleted after the
    gate was read, which the deferred foreign key finds at commit."""
    diag = getattr(error.__cause__, "diag", None)
    if diag is None:
        return False
    sqlstate = getattr(diag, "sqlstate", None)
    if sqlstate == "23502":  # not_null_violation: the gate
        return (
            diag.table_name == Event._meta.db_table
            and diag.column_name == Event._meta.get_field("tenant").column
        )
    # foreign_key_violation of a row pointing at a missing endpoint (the constraint's
    # name is truncated; PostgreSQL's detail names the table the key is missing from)
    return sqlstate == "23503" and (diag.message_detail or "").endswith(
        f'is not present in table "{Endpoint._meta.db_table}".'
    )


def routing_forget() -> None:
    """Drop every cached routing (tests that rebuild the database under a process)."""
    _cache.clear()
