"""Claims go endpoint by endpoint: fair between tenants, blind to skipped backlogs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from deliveries.intake.ingest import events_ingest
from deliveries.lifecycle.policy import current_policy
from deliveries.models import Delivery
from deliveries.worker.claims import deliveries_claim, deliveries_claim_fairly, due_endpoints
from tests.databases import postgresql_only
from tests.factories import endpoint_model_via_api
from webhooks.models import Endpoint
from webhooks.services.event_input import EventInput


def backlog(actor, events: int) -> None:
    inputs = [EventInput(type="a.b", data={"n": n}) for n in range(events)]
    events_ingest(tenant=actor.tenant, inputs=inputs)


def claimed_endpoints(limit: int, **kwargs) -> list[str]:
    policy = current_policy()
    return [c.endpoint_id for c in deliveries_claim(limit=limit, policy=policy, **kwargs)]


def test_a_quiet_tenants_new_delivery_is_in_the_next_claim_behind_a_deep_backlog(alice, bob):
    for n in range(4):
        endpoint_model_via_api(alice, f"http://127.0.0.1:9/{n}")
    backlog(alice, 500)  # 2,000 due rows, all older than bob's
    quiet = endpoint_model_via_api(bob)
    backlog(bob, 1)
    assert quiet.id in claimed_endpoints(limit=10)


def test_a_claim_shares_its_rows_between_the_endpoints_of_a_tenant(alice):
    first, second = (
        endpoint_model_via_api(alice, "http://127.0.0.1:9/1"),
        endpoint_model_via_api(alice, "http://127.0.0.1:9/2"),
    )
    backlog(alice, 50)
    taken = claimed_endpoints(limit=20)
    assert (taken.count(first.id), taken.count(second.id)) == (10, 10)


def test_a_skipped_endpoints_backlog_stays_untouched_and_the_others_flow(alice):
    full, other = (
        endpoint_model_via_api(alice, "http://127.0.0.1:9/1"),
        endpoint_model_via_api(alice, "http://127.0.0.1:9/2"),
    )
    backlog(alice, 300)
    taken = claimed_endpoints(limit=50, skip_endpoints={full.id})
    assert taken == [other.id] * 50
    assert Delivery.objects.filter(endpoint=full, status="pending").count() == 300


def test_an_endpoint_found_with_fewer_due_rows_than_asked_is_reported_exhausted(alice):
    deep, shallow = (
        endpoint_model_via_api(alice, "http://127.0.0.1:9/1"),
        endpoint_model_via_api(alice, "http://127.0.0.1:9/2"),
    )
    backlog(alice, 3)
    Delivery.objects.filter(endpoint=deep).update(next_attempt_at="2999-01-01T00:00:00Z")
    backlog(alice, 30)  # 30 more due for each
    claim = deliveries_claim_fairly(
        limit=100,
        policy=current_policy(),
        room=lambda e: 40 if e.id == deep.id else 20,
    )
    counts = {e: [c.endpoint_id for c in claim.deliveries].count(e) for e in (deep.id, shallow.id)}
    assert counts == {deep.id: 30, shallow.id: 20}  # room caps the shallow one
    assert claim.exhausted == {deep.id}  # 40 asked, 30 due


def test_circuit_open_endpoints_are_not_listed_as_due(alice):
    open_one, closed = (
        endpoint_model_via_api(alice, "http://127.0.0.1:9/1"),
        endpoint_model_via_api(alice, "http://127.0.0.1:9/2"),
    )
    backlog(alice, 2)
    Endpoint.objects.filter(pk=open_one.pk).update(circuit_state="open")
    assert [e.id for e in due_endpoints()] == [closed.id]


@postgresql_only
def test_looking_for_due_endpoints_and_claiming_use_the_endpoint_index(alice):
    for n in range(3):
        endpoint_model_via_api(alice, f"http://127.0.0.1:9/{n}")
    backlog(alice, 2000)
    analyze()
    with statements_run() as statements:
        due_endpoints()
        deliveries_claim(limit=30, policy=current_policy())
    looked_up, claimed = statements[0], next(s for s in statements if "LATERAL" in s[0])
    for sql, params in (looked_up, claimed):
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            plan = json.dumps(cursor.fetchone()[0])
        assert "delivery_endpoint_due" in plan
        assert "Seq Scan" not in plan or Delivery._meta.db_table not in _seq_scanned(plan)


@postgresql_only
def test_a_claim_walks_each_endpoint_through_its_own_index_whatever_the_costs_say(alice):
    # The isolation bench's case: a hanging endpoint keeps the oldest due rows while the
    # others drain, and the planner found walking the time-ordered `delivery_due` index
    # (the endpoint's rows come in time order there too, every tenth row or so) as cheap
    # as walking the endpoint's own: each share then passed over the stuck rows, and
    # claims of 100 rows took 38-95 ms instead of 11. Random reads priced high tip the
    # costs that way here; a claim must not depend on where they tip.
    stuck = endpoint_model_via_api(alice, f"http://127.0.0.1:9/{0}")
    (
        endpoint_model_via_api(alice, "http://127.0.0.1:9/1"),
        endpoint_model_via_api(alice, "http://127.0.0.1:9/2"),
    )
    backlog(alice, 2000)
    analyze()
    with statements_run() as statements:
        deliveries_claim_fairly(
            limit=20, policy=current_policy(), skip_endpoints={stuck.id}, first_attempts_only=True
        )
    sql, params = next(s for s in statements if "unnest" in s[0])
    for random_page_cost in (4, 40):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL random_page_cost = {random_page_cost}")
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            used = _plan_nodes(cursor.fetchone()[0], "Index Name")
        assert not any(name.startswith("delivery_due") for name in used), random_page_cost
        if random_page_cost == 4:  # the default: the endpoint's own index (its partitions')
            assert any(name.startswith("delivery_endpoint_due") for name in used)


def analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")


@contextmanager
def statements_run() -> Iterator[list[tuple[str, tuple]]]:
    """The SQL statements run inside the block, with their parameters."""
    statements: list[tuple[str, tuple]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        yield statements


def _plan_nodes(plan, key: str) -> set[str]:
    """Every value of `key` in an EXPLAIN (FORMAT JSON) plan."""
    return {node[key] for node in _nodes(plan) if key in node}


def _seq_scanned(plan: str) -> set[str]:
    return {
        node.get("Relation Name")
        for node in _nodes(json.loads(plan))
        if node.get("Node Type") == "Seq Scan"
    }


def _nodes(plan):
    if isinstance(plan, dict):
        yield plan
        for value in plan.values():
            yield from _nodes(value)
    elif isinstance(plan, list):
        for value in plan:
            yield from _nodes(value)


def test_beyond_the_limit_each_look_for_due_endpoints_goes_on_where_the_last_ended(alice):
    ids = sorted(endpoint_model_via_api(alice, f"http://127.0.0.1:9/{n}").id for n in range(5))
    backlog(alice, 1)
    first = [e.id for e in due_endpoints(limit=2)]
    second = [e.id for e in due_endpoints(after=first[-1], limit=2)]
    third = [e.id for e in due_endpoints(after=second[-1], limit=2)]
    assert first + second + third == ids
