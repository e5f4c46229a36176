"""Intake's PostgreSQL statements, each written once and whole, with named parameters.

Read these to know what an ingestion does to the database; ingest.py, routing.py and
sequences.py only choose the variant and the parameters. A test pins the text
(tests/deliveries/intake/test_ingest_sql.py): a change here is a change to how every event
comes in, and is made on purpose.

The ingest statements come in four whole variants rather than one text with holes:
GATED (outside a transaction: the routing may come from the process's cache, so the
statement checks it is current) or UNGATED (inside a caller's transaction: the routing
was read afresh, and a failed statement would abort the caller's transaction), each with
deliveries or for events that match no endpoint. They differ only in the `gate` and in
whether the delivery entries follow; the test checks that they differ in nothing else.

Every value is bound (none is written into the text), so each statement's text is the
same for 1 or 1,000 events and PostgreSQL parses and plans it once per connection
(core/postgresql/prepared.py). Ids and types come as text array literals (text_array),
the events' `data` as one jsonb array.
"""

from __future__ import annotations

# A tenant's routing and its version in one snapshot (routing.py): one row even when it
# has no active endpoint (e.id NULL), the version 0 before any endpoint change. The filter
# as text: routing.py keys its compiled predicates by it (jsonb's text is canonical).
ROUTING = """
SELECT v.version, e.id, e.event_types, e.filter
FROM (SELECT COALESCE(
    (SELECT version FROM webhooks_routingversion WHERE tenant_id = %(tenant_id)s), 0
) AS version) v
LEFT JOIN webhooks_endpoint e ON e.tenant_id = %(tenant_id)s AND e.is_active
ORDER BY e.id
"""

# Events with their deliveries, in one statement, while the tenant's routing version is
# still %(version)s.
#
# - gate: the tenant's id while its routing is the one the deliveries were routed with,
#   else no row: every event's tenant_id is read from it, so NULL fails the events' NOT
#   NULL column and the whole statement (routing.routing_changed tells it apart).
#   MATERIALIZED: read once, not once per event.
# - new_events: every event of the call, sharing %(now)s; `data` is the n-th element of
#   one jsonb array; `trace_context` the n-th of a text array, '' for none (a text array
#   literal has no NULL: core/postgresql/prepared.text_array). RETURNING: new_rows can
#   count them.
# - new_rows: the deliveries as rows, n their place in the list. Counted (not EXISTS,
#   which would stop at its first row): new_events runs to its end before the first row
#   of new_rows, so before the upsert reading them.
# - sequences: reserves each endpoint's numbers (sequences.py): adds its count of rows to
#   its counter and answers (endpoint_id, last). ORDER BY endpoint_id is the lock order:
#   two creators for the same endpoints never deadlock. A counter row stays locked until
#   commit and every other creator for its endpoint waits for it, so the events are
#   written before it and only the deliveries after.
# - new_deliveries: pending and due %(now)s; an endpoint's deliveries number up to its
#   new `last` in the order listed (as sequences.sequences_numbered does). Their foreign
#   keys are DEFERRABLE INITIALLY DEFERRED: checked at commit, when both are in.
# - TABLE sequences: each endpoint's last number, for deliveries_numbered.
INGEST_GATED = """
WITH gate AS MATERIALIZED (
    SELECT %(tenant_id)s::text WHERE COALESCE(
        (SELECT version FROM webhooks_routingversion WHERE tenant_id = %(tenant_id)s), 0
    ) = %(version)s
), new_events AS (
    INSERT INTO webhooks_event (id, tenant_id, type, data, created_at, ordering_key, trace_context)
    SELECT e.id, (SELECT * FROM gate), e.type, (%(data)s::jsonb) -> (e.n::int - 1), %(now)s, NULL,
        NULLIF(e.trace_context, '')
    FROM unnest(%(event_ids)s::text[], %(types)s::text[], %(trace_contexts)s::text[])
        WITH ORDINALITY AS e(id, type, trace_context, n)
    RETURNING id
), new_rows AS (
    SELECT * FROM unnest(
        %(delivery_ids)s::text[], %(delivery_event_ids)s::text[], %(endpoint_ids)s::text[]
    ) WITH ORDINALITY AS d(id, event_id, endpoint_id, n)
    WHERE (SELECT count(*) FROM new_events) > 0
), sequences AS (
    INSERT INTO deliveries_sequencecounter (endpoint_id, last, purged_through)
    SELECT endpoint_id, count(*), 0 FROM new_rows
    GROUP BY endpoint_id ORDER BY endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE SET last = deliveries_sequencecounter.last + EXCLUDED.last
    RETURNING endpoint_id, last
), new_deliveries AS (
    INSERT INTO deliveries_delivery (
        id, tenant_id, event_id, endpoint_id, status, attempt_count, schedule_offset,
        next_attempt_at, lease_expires_at, last_error, created_at, updated_at, sequence,
        ordering_key, blocked_by, head_since
    )
    SELECT d.id, %(tenant_id)s::text, d.event_id, d.endpoint_id, 'pending', 0, 0,
        %(now)s, NULL, '', %(now)s, %(now)s,
        s.last - count(*) OVER (PARTITION BY d.endpoint_id)
            + row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.n),
        NULL, NULL, NULL
    FROM new_rows AS d JOIN sequences s USING (endpoint_id)
)
TABLE sequences
"""

# INGEST_GATED for events that match no endpoint: the gate still holds (an endpoint made
# since the routing was read may take them).
INGEST_GATED_EVENTS_ONLY = """
WITH gate AS MATERIALIZED (
    SELECT %(tenant_id)s::text WHERE COALESCE(
        (SELECT version FROM webhooks_routingversion WHERE tenant_id = %(tenant_id)s), 0
    ) = %(version)s
)
INSERT INTO webhooks_event (id, tenant_id, type, data, created_at, ordering_key, trace_context)
SELECT e.id, (SELECT * FROM gate), e.type, (%(data)s::jsonb) -> (e.n::int - 1), %(now)s, NULL,
    NULLIF(e.trace_context, '')
FROM unnest(%(event_ids)s::text[], %(types)s::text[], %(trace_contexts)s::text[])
    WITH ORDINALITY AS e(id, type, trace_context, n)
"""

# INGEST_GATED inside a caller's transaction: the routing was read in it just before, so
# the gate is the tenant's id alone (no %(version)s).
INGEST_UNGATED = """
WITH gate AS MATERIALIZED (
    SELECT %(tenant_id)s::text
), new_events AS (
    INSERT INTO webhooks_event (id, tenant_id, type, data, created_at, ordering_key, trace_context)
    SELECT e.id, (SELECT * FROM gate), e.type, (%(data)s::jsonb) -> (e.n::int - 1), %(now)s, NULL,
        NULLIF(e.trace_context, '')
    FROM unnest(%(event_ids)s::text[], %(types)s::text[], %(trace_contexts)s::text[])
        WITH ORDINALITY AS e(id, type, trace_context, n)
    RETURNING id
), new_rows AS (
    SELECT * FROM unnest(
        %(delivery_ids)s::text[], %(delivery_event_ids)s::text[], %(endpoint_ids)s::text[]
    ) WITH ORDINALITY AS d(id, event_id, endpoint_id, n)
    WHERE (SELECT count(*) FROM new_events) > 0
), sequences AS (
    INSERT INTO deliveries_sequencecounter (endpoint_id, last, purged_through)
    SELECT endpoint_id, count(*), 0 FROM new_rows
    GROUP BY endpoint_id ORDER BY endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE SET last = deliveries_sequencecounter.last + EXCLUDED.last
    RETURNING endpoint_id, last
), new_deliveries AS (
    INSERT INTO deliveries_delivery (
        id, tenant_id, event_id, endpoint_id, status, attempt_count, schedule_offset,
        next_attempt_at, lease_expires_at, last_error, created_at, updated_at, sequence,
        ordering_key, blocked_by, head_since
    )
    SELECT d.id, %(tenant_id)s::text, d.event_id, d.endpoint_id, 'pending', 0, 0,
        %(now)s, NULL, '', %(now)s, %(now)s,
        s.last - count(*) OVER (PARTITION BY d.endpoint_id)
            + row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.n),
        NULL, NULL, NULL
    FROM new_rows AS d JOIN sequences s USING (endpoint_id)
)
TABLE sequences
"""

# INGEST_UNGATED for events that match no endpoint.
INGEST_UNGATED_EVENTS_ONLY = """
WITH gate AS MATERIALIZED (
    SELECT %(tenant_id)s::text
)
INSERT INTO webhooks_event (id, tenant_id, type, data, created_at, ordering_key, trace_context)
SELECT e.id, (SELECT * FROM gate), e.type, (%(data)s::jsonb) -> (e.n::int - 1), %(now)s, NULL,
    NULLIF(e.trace_context, '')
FROM unnest(%(event_ids)s::text[], %(types)s::text[], %(trace_contexts)s::text[])
    WITH ORDINALITY AS e(id, type, trace_context, n)
"""

# Reserve the numbers of new deliveries created through the ORM (creation.py), one item
# of %(endpoint_ids)s per delivery, in the caller's transaction: INGEST_GATED's
# `sequences` over an array instead of new_rows, locking in the same order.
SEQUENCES_TAKE = """
INSERT INTO deliveries_sequencecounter (endpoint_id, last, purged_through)
SELECT endpoint_id, count(*), 0 FROM unnest(%(endpoint_ids)s::text[]) AS c(endpoint_id)
GROUP BY endpoint_id ORDER BY endpoint_id
ON CONFLICT (endpoint_id) DO UPDATE SET last = deliveries_sequencecounter.last + EXCLUDED.last
RETURNING endpoint_id, last
"""
