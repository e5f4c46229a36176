"""The endpoint backlog sweep's statement (endpoint_backlogs.py), written once and whole
for each database, with named parameters. A test pins the text
(tests/deliveries/lifecycle/test_record_sql.py)."""

from __future__ import annotations

# Inactive, not deleted endpoints with pending deliveries (to park), at most %(limit)s.
# A skip scan of `delivery_endpoint_due`: one probe per endpoint with pending deliveries,
# however deep their backlogs, as claims find due endpoints (worker/claim_sql.py).
# 'pending' is a literal so that the planner matches the partial index's predicate, as a
# bound parameter may not.
INACTIVE_WITH_PENDING = """
WITH RECURSIVE pending(endpoint_id) AS (
    (SELECT endpoint_id FROM deliveries_delivery WHERE status = 'pending'
     ORDER BY endpoint_id LIMIT 1)
    UNION ALL
    SELECT later.endpoint_id FROM pending CROSS JOIN LATERAL (
        SELECT endpoint_id FROM deliveries_delivery
        WHERE status = 'pending' AND endpoint_id > pending.endpoint_id
        ORDER BY endpoint_id LIMIT 1
    ) later
)
SELECT e.id FROM pending JOIN webhooks_endpoint e ON e.id = pending.endpoint_id
WHERE NOT e.is_active AND e.deleted_at IS NULL
LIMIT %(limit)s
"""

# INACTIVE_WITH_PENDING on SQLite, which has no LATERAL: a plain join (the embedded
# set-up's backlogs are small).
INACTIVE_WITH_PENDING_SQLITE = """
SELECT DISTINCT e.id FROM deliveries_delivery d JOIN webhooks_endpoint e ON e.id = d.endpoint_id
WHERE d.status = 'pending' AND NOT e.is_active AND e.deleted_at IS NULL
LIMIT %(limit)s
"""
