"""`manage.py seed_demo` loads demo data with COPY and tops up on a second run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum

from console.services.demo_data import OWNERS
from deliveries.models import Attempt, AttemptMinute, Delivery
from dlq.models import DeadLetter
from webhooks.models import Endpoint, Tenant
from webhooks.services.endpoints import endpoint_signing_secrets


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
    # Every demo endpoint belongs to its tenant's customer (the consumer portal's owner).
    assert set(Endpoint.objects.values_list("tenant_id", "owner")) == set(OWNERS.items())

    call_command("seed_demo", "--dead-letters", "300", "--attempts", "3000", stdout=StringIO())
    # Topped up to the numbers asked for, not doubled.
    assert (
        DeadLetter.objects.count() == 300 and Attempt.objects.count() <= max(attempts, 3000) + 150
    )
    assert Tenant.objects.count() == 6

    call_command("seed_demo", "--dead-letters", "350", "--attempts", "3000", stdout=StringIO())
    assert DeadLetter.objects.count() == 350


@pytest.mark.django_db(transaction=True)
def test_the_demo_endpoints_sign_and_show_like_any_other(client, django_user_model):
    # Their secrets were stored in plain text: every demo endpoint's page was a 500
    # ("cannot decrypt a stored secret"), and nothing could be signed for them.
    call_command("seed_demo", "--dead-letters", "10", "--attempts", "100", stdout=StringIO())
    client.force_login(django_user_model.objects.create_user("s", is_staff=True))
    for endpoint in Endpoint.objects.all():
        assert endpoint_signing_secrets(endpoint=endpoint)[0].startswith("whsec_")
        assert client.get(f"/endpoints/{endpoint.pk}/").status_code == 200
