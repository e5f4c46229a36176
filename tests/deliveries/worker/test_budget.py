"""The retry budget: while first attempts wait, retries get at most their share."""

from __future__ import annotations

from deliveries.lifecycle.policy import current_policy
from deliveries.models import Delivery
from deliveries.worker.budget import RetryBudget
from deliveries.worker.claims import deliveries_claim


def test_while_first_attempts_wait_retries_get_only_what_keeps_them_within_the_share() -> None:
    budget = RetryBudget(0.2)
    assert budget.retry_allowance(firsts_waiting=True) == 0  # nothing sent yet
    budget.claimed(retries=0, firsts=80)
    assert budget.retry_allowance(firsts_waiting=True) == 20  # 20 of 100 = the share
    budget.claimed(retries=20, firsts=0)
    assert budget.retry_allowance(firsts_waiting=True) == 0
    budget.claimed(retries=0, firsts=40)
    assert budget.retry_allowance(firsts_waiting=True) == 10  # 30 of 150


def test_with_no_first_attempt_waiting_retries_are_not_held_back() -> None:
    budget = RetryBudget(0.2)
    budget.claimed(retries=200, firsts=0)
    assert budget.retry_allowance(firsts_waiting=False) is None
    assert RetryBudget(1).retry_allowance(firsts_waiting=True) is None


def test_a_first_attempts_only_claim_leaves_retries_waiting(alice) -> None:
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    for n in range(6):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    retries = list(Delivery.objects.values_list("id", flat=True)[:4])
    Delivery.objects.filter(pk__in=retries).update(attempt_count=2)  # tried twice already
    claimed = deliveries_claim(limit=10, policy=current_policy(), first_attempts_only=True)
    assert len(claimed) == 2 and not {c.id for c in claimed} & set(retries)
    assert all(c.attempts_in_schedule == 1 for c in claimed)


def test_a_retries_only_claim_leaves_first_attempts_waiting(alice) -> None:
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    for n in range(6):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    retries = list(Delivery.objects.values_list("id", flat=True)[:4])
    Delivery.objects.filter(pk__in=retries).update(attempt_count=2)
    claimed = deliveries_claim(limit=3, policy=current_policy(), retries_only=True)
    assert len(claimed) == 3 and {c.id for c in claimed} <= set(retries)
