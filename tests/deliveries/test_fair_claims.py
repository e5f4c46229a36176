"""Claims go endpoint by endpoint: fair between tenants, blind to skipped backlogs."""

from __future__ import annotations

import json

from django.db import connection

from deliveries.models import Delivery
from deliveries.policy import current_policy
from deliveries.services.claims import deliveries_claim, deliveries_claim_fairly, due_endpoints
from webhooks.models import Endpoint
from webhooks.services.event_input import EventInput
from webhooks.services.events import events_ingest


def endpoint(actor, n: int = 0) -> Endpoint:
    answer = actor.client.post(
        "/api/v1/endpoints", {"url": f"http://127.0.0.1:9/{n}"}, format="json"
    )
    return Endpoint.objects.get(pk=answer.json()["id"])


def backlog(actor, events: int) -> None:
    inputs = [EventInput(type="a.b", data={"n": n}) for n in range(events)]
    events_ingest(tenant=actor.tenant, inputs=inputs)


def claimed_endpoints(limit: int, **kwargs) -> list[str]:
    policy = current_policy()
    return [
        c.endpoint_id
        for c in deliveries_claim(delivery_ids=[], limit=limit, policy=policy, **kwargs)
    ]


def test_a_quiet_tenants_new_delivery_is_in_the_next_claim_behind_a_deep_backlog(alice, bob):
    for n in range(4):
        endpoint(alice, n)
    backlog(alice, 500)  # 2,000 due rows, all older than bob's
    quiet = endpoint(bob)
    backlog(bob, 1)
    assert quiet.id in claimed_endpoints(limit=10)


def test_a_claim_shares_its_rows_between_the_endpoints_of_a_tenant(alice):
    first, second = endpoint(alice, 1), endpoint(alice, 2)
    backlog(alice, 50)
    taken = claimed_endpoints(limit=20)
    assert (taken.count(first.id), taken.count(second.id)) == (10, 10)


def test_a_skipped_endpoints_backlog_stays_untouched_and_the_others_flow(alice):
    full, other = endpoint(alice, 1), endpoint(alice, 2)
    backlog(alice, 300)
    taken = claimed_endpoints(limit=50, skip_endpoints={full.id})
    assert taken == [other.id] * 50
    assert Delivery.objects.filter(endpoint=full, status="pending").count() == 300


def test_an_endpoint_found_with_fewer_due_rows_than_asked_is_reported_exhausted(alice):
    deep, shallow = endpoint(alice, 1), endpoint(alice, 2)
    backlog(alice, 3)
    Delivery.objects.filter(endpoint=deep).update(next_attempt_at="2999-01-01T00:00:00Z")
    backlog(alice, 30)  # 30 more due for each
    claim = deliveries_claim_fairly(
        delivery_ids=[],
        limit=100,
        policy=current_policy(),
        room=lambda e: 40 if e.id == deep.id else 20,
    )
    counts = {e: [c.endpoint_id for c in claim.deliveries].count(e) for e in (deep.id, shallow.id)}
    assert counts == {deep.id: 30, shallow.id: 20}  # room caps the shallow one
    assert claim.exhausted == {deep.id}  # 40 asked, 30 due


def test_circuit_open_endpoints_are_not_listed_as_due(alice):
    open_one, closed = endpoint(alice, 1), endpoint(alice, 2)
    backlog(alice, 2)
    Endpoint.objects.filter(pk=open_one.pk).update(circuit_state="open")
    assert [e.id for e in due_endpoints()] == [closed.id]


def test_looking_for_due_endpoints_and_claiming_use_the_endpoint_index(alice):
    for n in range(3):
        endpoint(alice, n)
    backlog(alice, 2000)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")
    statements: list[tuple[str, tuple]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        due_endpoints()
        deliveries_claim(delivery_ids=[], limit=30, policy=current_policy())
    looked_up, claimed = statements[0], next(s for s in statements if "LATERAL" in s[0])
    for sql, params in (looked_up, claimed):
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            plan = json.dumps(cursor.fetchone()[0])
        assert "delivery_endpoint_due" in plan
        assert "Seq Scan" not in plan or Delivery._meta.db_table not in _seq_scanned(plan)


def _seq_scanned(plan: str) -> set[str]:
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if node.get("Node Type") == "Seq Scan":
                found.add(node.get("Relation Name"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(plan))
    return found


def test_beyond_the_limit_each_look_for_due_endpoints_goes_on_where_the_last_ended(alice):
    ids = sorted(endpoint(alice, n).id for n in range(5))
    backlog(alice, 1)
    first = [e.id for e in due_endpoints(limit=2)]
    second = [e.id for e in due_endpoints(after=first[-1], limit=2)]
    third = [e.id for e in due_endpoints(after=second[-1], limit=2)]
    assert first + second + third == ids
