"""The claim's statements are written once, whole (deliveries/services/claim_sql.py):
what runs is exactly that text, and the text is pinned here, so a change to how every
worker claims is made on purpose (update the copy below with it)."""

from __future__ import annotations

from django.db import connection

from deliveries.policy import current_policy
from deliveries.services import claim_sql
from deliveries.services.claims import deliveries_claim_fairly, due_endpoints
from tests.databases import postgresql_only

PINNED_CLAIM = """
WITH picked AS MATERIALIZED (
    SELECT d.id
    FROM unnest(%(endpoint_ids)s::text[], %(shares)s::int[]) AS share(endpoint_id, n)
    JOIN webhooks_endpoint e ON e.id = share.endpoint_id AND e.is_active
    CROSS JOIN LATERAL (
        SELECT id FROM deliveries_delivery
        WHERE endpoint_id = share.endpoint_id AND status = 'pending'
        AND next_attempt_at <= statement_timestamp()
        AND (%(any_attempt)s OR (attempt_count = schedule_offset) = %(first_attempts)s)
        ORDER BY next_attempt_at LIMIT share.n FOR UPDATE SKIP LOCKED
    ) d
)
UPDATE deliveries_delivery SET status = 'delivering',
    lease_expires_at = statement_timestamp() + make_interval(secs => %(lease_seconds)s),
    attempt_count = attempt_count + 1, updated_at = statement_timestamp()
WHERE id IN (SELECT id FROM picked)
RETURNING id, tenant_id, event_id, endpoint_id, attempt_count, schedule_offset, sequence,
    ordering_key, head_since
"""

PINNED_DUE_ENDPOINTS = """
WITH RECURSIVE pending(endpoint_id, next_at) AS (
    (SELECT endpoint_id, next_attempt_at FROM deliveries_delivery
     WHERE status = 'pending' AND endpoint_id > %(after)s
     ORDER BY endpoint_id, next_attempt_at LIMIT 1)
    UNION ALL
    SELECT later.* FROM pending CROSS JOIN LATERAL (
        SELECT endpoint_id, next_attempt_at FROM deliveries_delivery
        WHERE status = 'pending' AND endpoint_id > pending.endpoint_id
        ORDER BY endpoint_id, next_attempt_at LIMIT 1
    ) later
)
SELECT e.id, e.tenant_id, e.rate_limit
FROM pending JOIN webhooks_endpoint e ON e.id = pending.endpoint_id
WHERE pending.next_at <= statement_timestamp() AND e.circuit_state = 'closed' AND e.is_active
LIMIT %(limit)s
"""


def test_the_statements_are_the_pinned_text() -> None:
    assert claim_sql.CLAIM == PINNED_CLAIM
    assert claim_sql.DUE_ENDPOINTS == PINNED_DUE_ENDPOINTS


def test_the_statements_name_the_tables_the_models_use() -> None:
    from deliveries.models import Delivery
    from webhooks.models import Endpoint

    for sql in (claim_sql.CLAIM, claim_sql.DUE_ENDPOINTS):
        assert Delivery._meta.db_table in sql and Endpoint._meta.db_table in sql


@postgresql_only
def test_a_claim_runs_exactly_those_statements(alice) -> None:
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json")
    ran: list[str] = []

    def capture(execute, sql, params, many, context):
        ran.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        due = due_endpoints()
        claim = deliveries_claim_fairly(limit=10, policy=current_policy(), due=due)
    assert len(claim.deliveries) == 1
    assert claim_sql.DUE_ENDPOINTS in ran and claim_sql.CLAIM in ran
