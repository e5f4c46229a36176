"""The claim's statements are written once, whole (deliveries/worker/claim_sql.py):
what runs is exactly that text, and the text is pinned here (by its digest), so a change
to how every worker claims is made on purpose."""

from __future__ import annotations

import hashlib

from django.db import connection

from deliveries.lifecycle.policy import current_policy
from deliveries.worker import claim_sql
from deliveries.worker.claims import deliveries_claim_fairly, due_endpoints
from tests.databases import postgresql_only

# The SHA-256 of each statement's text: whoever changes a statement reads it whole again
# (EXPLAIN it on a real backlog: tests/deliveries/worker/test_fair_claims.py) and updates this.
PINNED = {
    "CLAIM": "b9383c8e44cb2b70dcc4240cc3756d9fdc1bb5ff5cc3cb01dbecf69b740a5e3b",
    "DUE_ENDPOINTS": "afb4b84fca69c6e34b26c57ef8bc4cb183409dffe7fff13905ca4c10fcbe7c8d",
    "ENDPOINTS": "a853b9f95055bd3dac5d1f53aa6b57126b49ea806395a74e6e6f3225229c43cc",
}


def test_the_statements_are_the_pinned_text() -> None:
    for name, digest in PINNED.items():
        text = getattr(claim_sql, name)
        assert hashlib.sha256(text.encode()).hexdigest() == digest, f"{name} changed:\n{text}"


def test_the_statements_name_the_tables_the_models_use() -> None:
    from deliveries.models import Delivery
    from webhooks.models import Endpoint

    for template in (claim_sql.CLAIM, claim_sql.DUE_ENDPOINTS):
        sql = claim_sql.on(template, Delivery._meta.db_table)
        assert f"FROM {Delivery._meta.db_table}" in sql and Endpoint._meta.db_table in sql
        assert "{" not in sql
    assert f"FROM {Endpoint._meta.db_table} " in claim_sql.ENDPOINTS


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
    # Bounds not given: the table (the worker names one partition when it can).
    for template in (claim_sql.DUE_ENDPOINTS, claim_sql.CLAIM):
        assert claim_sql.on(template, "deliveries_delivery") in ran
    assert claim_sql.ENDPOINTS in ran
