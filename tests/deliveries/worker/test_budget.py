"""The retry budget: while first attempts wait, retries get at most their share."""

from __future__ import annotations

from deliveries.models import Delivery
from deliveries.policy import current_policy
from deliveries.services.claims import deliveries_claim
from deliveries.worker.budget import RetryBudget


def test_over_budget_it_asks_for_first_attempts_until_none_wait() -> None:
    budget = RetryBudget(0.2)
    assert not budget.first_attempts_only()
    budget.claimed(retries=40, firsts=60, first_only=False, short=False)
    assert budget.first_attempts_only()  # 40 % retries > 20 %
    budget.claimed(retries=0, firsts=100, first_only=True, short=False)
    assert not budget.first_attempts_only()  # 20 % of the last 200: within
    budget.claimed(retries=50, firsts=0, first_only=False, short=False)
    assert budget.first_attempts_only()
    budget.claimed(retries=0, firsts=3, first_only=True, short=True)  # no more firsts due
    assert not budget.first_attempts_only()
    budget.claimed(retries=50, firsts=0, first_only=False, short=False)
    assert not budget.first_attempts_only()  # still none waiting: retries go on
    budget.claimed(retries=10, firsts=5, first_only=False, short=False)  # firsts again
    assert budget.first_attempts_only()


def test_a_first_attempts_only_claim_leaves_retries_waiting(alice) -> None:
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    for n in range(6):
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {"n": n}}, format="json")
    retries = list(Delivery.objects.values_list("id", flat=True)[:4])
    Delivery.objects.filter(pk__in=retries).update(attempt_count=2)  # tried twice already
    claimed = deliveries_claim(
        delivery_ids=[], limit=10, policy=current_policy(), first_attempts_only=True
    )
    assert len(claimed) == 2 and not {c.id for c in claimed} & set(retries)
    assert all(c.attempts_in_schedule == 1 for c in claimed)
