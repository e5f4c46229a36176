"""The claim's PostgreSQL statements, each written once and whole, with named parameters.

Read these to know what a claim does to the database; claims.py only chooses the
parameters (and claims_sqlite.py is the embedded set-up's twin). A test pins the text:
a change here is a change to how every worker claims, and is made on purpose.

The database's clock (`statement_timestamp()`) decides what is due and when a lease
ends, so every worker and scheduler agree however far their own clocks drift.
"""

from __future__ import annotations

import functools
import re

# Active endpoints with a closed circuit and a delivery due now, in id order from
# %(after)s on. A skip scan of the `delivery_endpoint_due` index: one probe per endpoint
# with pending deliveries finds its earliest one, whatever the depth of its backlog, so a
# 100,000-deep backlog costs one probe, not a scan (DESIGN decision 12). %(floor)s and
# %(ceiling)s: as in CLAIM below.
DUE_ENDPOINTS = """
WITH RECURSIVE pending(endpoint_id, next_at) AS (
    (SELECT endpoint_id, next_attempt_at FROM {deliveries}
     WHERE status = 'pending' AND endpoint_id > %(after)s AND id >= %(floor)s
     AND (%(ceiling)s = '' OR id < %(ceiling)s)
     ORDER BY endpoint_id, next_attempt_at LIMIT 1)
    UNION ALL
    SELECT later.* FROM pending CROSS JOIN LATERAL (
        SELECT endpoint_id, next_attempt_at FROM {deliveries}
        WHERE status = 'pending' AND endpoint_id > pending.endpoint_id AND id >= %(floor)s
        AND (%(ceiling)s = '' OR id < %(ceiling)s)
        ORDER BY endpoint_id, next_attempt_at LIMIT 1
    ) later
)
SELECT e.id, e.tenant_id, e.rate_limit
FROM pending JOIN webhooks_endpoint e ON e.id = pending.endpoint_id
WHERE pending.next_at <= statement_timestamp() AND e.circuit_state = 'closed' AND e.is_active
LIMIT %(limit)s
"""

# Claim up to %(shares)s[i] due rows of endpoint %(endpoint_ids)s[i], oldest first, for
# every i at once, and move them to `delivering` with a lease of %(lease_seconds)s,
# numbering their attempt. %(any_attempt)s, else only first attempts (%(first_attempts)s)
# or only retries: the retry budget's choice (worker/budget.py).
#
# - Per endpoint a LATERAL walk of `delivery_endpoint_due` stops after its share, however
#   deep the backlog behind it.
# - Only active endpoints: once a deactivation or deletion has committed, no claim takes
#   their deliveries (the worker's list of due endpoints may be 0.2 s old).
# - FOR UPDATE SKIP LOCKED: two claimers never take the same row; a row another claim
#   just changed is re-checked, one it holds is skipped.
# - MATERIALIZED: the rows are picked once. As a plain `IN (subquery … LIMIT)` the planner
#   may rescan the subquery, and with SKIP LOCKED each rescan finds other rows (measured:
#   one claim took 1,853 rows for a limit of 100).
# - The locked rows are updated by primary key alone: with the conditions repeated, the
#   planner could also find them by scanning every due row.
# - The claimed rows come back with their event (type, data, time, trace context): the
#   body to sign and the attempt span's parent, without a second query per batch
#   (building it from 100 ids cost more than the claim).
# - The parameters are bound client-side (Django's psycopg default), so the planner sees
#   the attempt filter's booleans as constants and folds the filter away.
# - %(floor)s, %(ceiling)s, %(event_floor)s and %(event_ceiling)s (partitions.claim_bounds,
#   '' for none): the ids a pending delivery can have, as constants, so the planner
#   leaves out the partitions of deliveries and events outside them (with a month of
#   them, planning took 6-10 ms, not 0.7), and DEFAULT and those made ahead. With a
#   bound '', `'' = ''` folds the clause away.
# - {deliveries}: the table, or the one partition holding the whole range between the
#   bounds when there is one (`on()`): a claim over a plain table plans and runs 7-15 %
#   faster than over the partitioned one pruned to that partition.
CLAIM = """
WITH picked AS MATERIALIZED (
    SELECT d.id
    FROM unnest(%(endpoint_ids)s::text[], %(shares)s::int[]) AS share(endpoint_id, n)
    JOIN webhooks_endpoint e ON e.id = share.endpoint_id AND e.is_active
    CROSS JOIN LATERAL (
        SELECT id FROM {deliveries}
        WHERE endpoint_id = share.endpoint_id AND status = 'pending' AND id >= %(floor)s
        AND (%(ceiling)s = '' OR id < %(ceiling)s)
        AND next_attempt_at <= statement_timestamp()
        AND (%(any_attempt)s OR (attempt_count = schedule_offset) = %(first_attempts)s)
        ORDER BY next_attempt_at LIMIT share.n FOR UPDATE SKIP LOCKED
    ) d
), claimed AS (
    UPDATE {deliveries} SET status = 'delivering',
        lease_expires_at = statement_timestamp() + make_interval(secs => %(lease_seconds)s),
        attempt_count = attempt_count + 1, updated_at = statement_timestamp()
    WHERE id IN (SELECT id FROM picked) AND id >= %(floor)s
    AND (%(ceiling)s = '' OR id < %(ceiling)s)
    RETURNING id, tenant_id, event_id, endpoint_id, attempt_count, schedule_offset, sequence,
        ordering_key, head_since
)
SELECT c.id, c.tenant_id, c.event_id, c.endpoint_id, c.attempt_count, c.schedule_offset,
    c.sequence, c.ordering_key, c.head_since, ev.type, ev.data, ev.created_at,
    ev.trace_context
FROM claimed c JOIN webhooks_event ev ON ev.id = c.event_id AND ev.id >= %(event_floor)s
    AND (%(event_ceiling)s = '' OR ev.id < %(event_ceiling)s)
"""

# The endpoints of a claimed batch, deleted ones included (their deliveries are recorded
# unsent): one query per batch, raw (the ORM's `in_bulk` compiled a query per claim that
# cost more than running it).
ENDPOINTS = "SELECT * FROM webhooks_endpoint WHERE id = ANY(%s::text[])"


_DELIVERIES = re.compile(r"deliveries_delivery(_p[0-9]+)?")


# Bounded: a new partition comes every interval, and only the current ones are asked for.
@functools.lru_cache(maxsize=16)
def on(statement: str, deliveries: str) -> str:
    """`statement` (CLAIM or DUE_ENDPOINTS) reading and updating `deliveries`: the table
    or one of its partitions (a catalog name from partitions.claim_bounds, never input)."""
    if not _DELIVERIES.fullmatch(deliveries):
        raise ValueError(f"not a deliveries table: {deliveries!r}")
    return statement.replace("{deliveries}", deliveries)
