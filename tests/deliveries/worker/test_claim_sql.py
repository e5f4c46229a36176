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
    "CLAIM": "d7b81f9577e76414613def7e0192b0611b345c53e6b507a2579ae1639bfb900c",
    "DUE_ENDPOINTS": "176eb1fd07d87136213082184453b3b15a64f13c107330d6ee3425c25e7f9e42",
    "ENDPOINTS": "a853b9f95055bd3dac5d1f53aa6b57126b49ea806395a74e6e6f3225229c43cc",
}


def test_the_statements_are_the_pinned_text() -> None:
    for name, digest in PINNED.items():
        text = getattr(claim_sql, name)
        assert hashlib.sha256(text.encode()).hexdigest() == digest, f"{name} changed:\n{text}"


def test_the_statements_name_the_tables_the_models_use() -> None:
    from deliveries.models import Delivery
    from webhooks.models import Endpoint

    for sql in (claim_sql.CLAIM, claim_sql.DUE_ENDPOINTS):
        assert Delivery._meta.db_table in sql and Endpoint._meta.db_table in sql
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
    assert claim_sql.DUE_ENDPOINTS in ran and claim_sql.CLAIM in ran
    assert claim_sql.ENDPOINTS in ran
