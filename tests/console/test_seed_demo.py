"""`manage.py seed_demo` loads demo data with COPY and tops up on a second run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum

from deliveries.models import Attempt, AttemptMinute, Delivery
from dlq.models import DeadLetter
from webhooks.models import Endpoint, Tenant


@pytest.mark.django_db(transaction=True)  # VACUUM cannot run inside the test transaction
def test_it_seeds_demo_data_and_a_second_run_adds_only_what_is_missing():
    out = StringIO()
    call_command("seed_demo", "--dead-letters", "300", "--attempts", "3000", stdout=out)

    assert DeadLetter.objects.count() == 300
    attempts = Attempt.objects.count()
    assert 2750 <= attempts <= 3250  # about what was asked for (tries are random)
    assert Delivery.objects.filter(status="dead").count() == 300
    assert not Delivery.objects.exclude(status__in=["dead", "succeeded"]).exists()
    assert AttemptMinute.objects.aggregate(n=Sum("count"))["n"] == attempts
    assert Tenant.objects.count() == 6 and Endpoint.objects.count() == 10
    assert "done in" in out.getvalue()

    call_command("seed_demo", "--dead-letters", "300", "--attempts", "3000", stdout=StringIO())
    # Topped up to the numbers asked for, not doubled.
    assert (
        DeadLetter.objects.count() == 300 and Attempt.objects.count() <= max(attempts, 3000) + 150
    )
    assert Tenant.objects.count() == 6

    call_command("seed_demo", "--dead-letters", "350", "--attempts", "3000", stdout=StringIO())
    assert DeadLetter.objects.count() == 350
