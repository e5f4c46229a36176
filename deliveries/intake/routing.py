"""Which active endpoints of a tenant take an event type, cached in each process.

Reading a tenant's active endpoints before every ingestion cost a round trip and ~9% of
the web process's CPU per event. The cache may never route to an endpoint deleted or
deactivated, however recently and from whichever process, so it is checked by the
insert itself:

1. Every endpoint change that alters routing (insert, delete, `is_active`, `event_types`,
   `filter`) sets the tenant's `RoutingVersion` in its own transaction, by triggers on the endpoint
   table (migration 0006): the worker's deactivation, the admin and raw SQL included.
   The number comes from a sequence, so a rolled-back change's number is never current.
2. The routing and its version are read together, in one statement (one snapshot).
3. The ingest statement writes its events only while the tenant's version is still the
   one it routed with (the `gate` of ingest_sql.INGEST_GATED); otherwise it fails with
   `RoutingChanged` and the caller reads the routing again and retries.

Filters (DESIGN decision 24) are compiled when the routing is read, kept by the filter's
text, so an endpoint whose filter did not change is not compiled again when another
endpoint of its tenant changes. Per event type the routing keeps who takes it
(fan_out.py): routing an event asks its filters' clauses once each, and a tenant with no
filter does no filter work at all.

PostgreSQL only: the ORM path of other databases reads the endpoints every time (its
filters come from the same compiled cache).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import IntegrityError, connection

from core.crypto import DecryptionFailed
from core.exceptions import HomingError, InvalidInput
from deliveries.intake.fan_out import (
    MATCHES_NOTHING,
    CompiledFilter,
    TypeFanOut,
    compiled_filter,
    fan_out_build,
)
from deliveries.intake.ingest_sql import ROUTING
from webhooks.filters import event_document
from webhooks.models import Endpoint, Event
from webhooks.services.endpoint_filters import filter_opened
from webhooks.services.event_input import EventInput

logger = logging.getLogger(__name__)

CACHE_TENANTS = 10_000  # tenants remembered per process; past it the cache starts over
CACHE_TYPES = 1_000  # event types remembered per tenant routing
# Compiled filters remembered per process (a filter is at most 4 KiB of JSON, its closures
# a few times that); past it the cache starts over.
CACHE_FILTERS = 20_000


@dataclass
class Routing:
    """A tenant's active endpoints (id and event_types only) as of `version`, the
    compiled filters of those that have one, and per event type who takes it (fan_out.py)."""

    version: int
    endpoints: tuple[Endpoint, ...]
    filters: dict[str, CompiledFilter] = field(default_factory=dict)
    _fan_outs: dict[str, TypeFanOut] = field(default_factory=dict, repr=False)

    def routed(self, item: EventInput, *, exclude: str | None = None) -> Sequence[str]:
        """The ids of the endpoints that take this event: its type, then their filters,
        in a stable order (shared: read only)."""
        fan_out = self._fan_outs.get(item.type)
        if fan_out is None:
            filters = self.filters
            fan_out = fan_out_build(
                item.type,
                ((e.pk, filters.get(e.pk)) for e in self.endpoints if e.matches(item.type)),
            )
            if len(self._fan_outs) < CACHE_TYPES:
                self._fan_outs[item.type] = fan_out
        found = fan_out.endpoint_ids(item)
        return found if exclude is None else [pk for pk in found if pk != exclude]


def endpoints_filtered(
    endpoints: Iterable[Endpoint], filters: dict[str, CompiledFilter], item: EventInput
) -> list[Endpoint]:
    """Those of `endpoints` whose filter (if any) matches the event (the ORM path: it
    reads the endpoints for each ingestion, so it has no per-type fan-out to keep)."""
    if not filters:
        return list(endpoints)
    document = event_document(item.type, item.data, item.ordering_key)
    # Endpoints with equal filters share one compiled filter (filter_predicate's cache):
    # each is asked once per event.
    answers: dict[int, bool] = {}
    chosen = []
    for endpoint in endpoints:
        compiled = filters.get(endpoint.pk)
        if compiled is None:
            chosen.append(endpoint)
            continue
        answer = answers.get(id(compiled))
        if answer is None:
            answer = answers[id(compiled)] = compiled.whole(document)
        if answer:
            chosen.append(endpoint)
    return chosen


# Stored filter → compiled, by the stored token (opened once), and by the filter's JSON, so
# equal filters share one compiled form although each token is encrypted anew.
_by_token: dict[str, CompiledFilter | None] = {}
_by_text: dict[str, CompiledFilter] = {}


def filter_predicate(stored: str) -> CompiledFilter | None:
    """The compiled form of a stored filter (encrypted: endpoint_filters), from the
    process's caches: a token is decrypted when routing first reads it, never per event.
    None for no filter ("" or `{}`: every event matches)."""
    if not stored:
        return None
    if stored not in _by_token:
        if len(_by_token) >= CACHE_FILTERS:
            _by_token.clear()
        _by_token[stored] = _compiled(stored)
    return _by_token[stored]


def _compiled(stored: str) -> CompiledFilter | None:
    try:
        value = filter_opened(stored)
    except (DecryptionFailed, ValueError):
        # No key of HOMING_ENCRYPTION_KEY opens it: it takes nothing, rather than fail
        # every ingestion of its tenant or take what it was meant to keep out.
        logger.error("an endpoint filter cannot be decrypted: it matches nothing")
        return MATCHES_NOTHING
    if not value:
        return None
    text = json.dumps(value, sort_keys=True)
    found = _by_text.get(text)
    if found is None:
        if len(_by_text) >= CACHE_FILTERS:
            _by_text.clear()
        try:
            found = compiled_filter(value)
        except InvalidInput:
            # Saved around the API's check (raw SQL): it takes nothing, likewise.
            logger.error("endpoint filter does not compile, it matches nothing: %s", text[:200])
            found = MATCHES_NOTHING
        _by_text[text] = found
    return found


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
            for _, pk, types, _ in rows
            if pk is not None
        ),
        filters={
            pk: match
            for _, pk, _, text in rows
            if pk is not None and (match := filter_predicate(text)) is not None
        },
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
        # The table named is the partition the event went to (webhooks_event_p…).
        table = diag.table_name or ""
        return (
            table == Event._meta.db_table or table.startswith(f"{Event._meta.db_table}_")
        ) and diag.column_name == Event._meta.get_field("tenant").column
    # foreign_key_violation of a row pointing at a missing endpoint (the constraint's
    # name is truncated; PostgreSQL's detail names the table the key is missing from)
    return sqlstate == "23503" and (diag.message_detail or "").endswith(
        f'is not present in table "{Endpoint._meta.db_table}".'
    )


def routing_forget() -> None:
    """Drop every cached routing (tests that rebuild the database under a process)."""
    _cache.clear()
    _by_token.clear()
    _by_text.clear()
