"""`manage.py seed_demo` loads demo data with COPY and tops up on a second run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum

from console.services.demo_data import EVENT_TYPES, OWNERS, TENANTS
from deliveries.models import Attempt, AttemptMinute, Delivery
from dlq.models import DeadLetter
from webhooks.models import Endpoint, Tenant
from webhooks.services.endpoints import endpoint_signing_secrets

# What the demo promises, written out from demo_data's tables: two endpoints for most
# tenants (a primary for every type, a secondary for orders and invoices), one each for
# Initech and Hooli; every one owned by its tenant's customer.
DEMO_ENDPOINTS = {
    f"ep_demo_{tenant[9:]}_{n}": (tenant, f"https://{host}/webhooks/homing", OWNERS[tenant])
    for tenant, (_, hosts) in TENANTS.items()
    for n, host in enumerate(hosts)
}


def _assert_the_demo_data_it_promises(dead_letters: int) -> None:
    endpoints = {e.pk: (e.tenant_id, e.url, e.owner) for e in Endpoint.objects.all()}
    assert endpoints == DEMO_ENDPOINTS and len(endpoints) == 10
    assert set(Tenant.objects.values_list("id", flat=True)) == set(TENANTS)
    letters = DeadLetter.objects.select_related("delivery")
    assert letters.count() == dead_letters
    for letter in letters:
        # Each dead letter stands for a dead delivery of a demo endpoint of its tenant.
        assert letter.delivery.status == "dead" and letter.endpoint_id in DEMO_ENDPOINTS
        assert DEMO_ENDPOINTS[letter.endpoint_id][0] == letter.tenant_id
        assert letter.event_type in EVENT_TYPES
        assert letter.reason.startswith("HTTP ")
        tries = letter.delivery.attempt_count
        assert Attempt.objects.filter(delivery=letter.delivery).count() == tries
        # Both kinds: refused at once (4xx, one try) or given up after 3 to 9 tries (5xx).
        assert (tries == 1 and "not retryable" in letter.reason) or (
            3 <= tries <= 9 and f"after {tries} attempts" in letter.reason
        ), (tries, letter.reason)
    reasons = " ".join(letters.values_list("reason", flat=True))
    assert "not retryable" in reasons and "attempts" in reasons
    # Most deliveries succeeded, with the attempts they took.
    succeeded = Delivery.objects.filter(status="succeeded")
    assert succeeded.count() > dead_letters
    assert not succeeded.exclude(attempts__status_code=200).exists()


@pytest.mark.django_db(transaction=True)  # VACUUM cannot run inside the test transaction
def test_it_seeds_demo_data_and_a_second_run_adds_only_what_is_missing():
    out = StringIO()
    call_command("seed_demo", "--dead-letters", "300", "--attempts", "3000", stdout=out)

    assert DeadLetter.objects.count() == 300
    # Each keeps what a replay needs once retention drops its rows.
    letter = DeadLetter.objects.select_related("delivery", "event").first()
    assert letter is not None and letter.kept
    assert (letter.sequence, letter.event_data) == (letter.delivery.sequence, letter.event.data)
    attempts = Attempt.objects.count()
    assert 2750 <= attempts <= 3250  # about what was asked for (tries are random)
    assert Delivery.objects.filter(status="dead").count() == 300
    assert not Delivery.objects.exclude(status__in=["dead", "succeeded"]).exists()
    assert AttemptMinute.objects.aggregate(n=Sum("count"))["n"] == attempts
    assert "done in" in out.getvalue()
    _assert_the_demo_data_it_promises(dead_letters=300)

    call_command("seed_demo", "--dead-letters", "300", "--attempts", "3000", stdout=StringIO())
    # Topped up to the numbers asked for, not doubled.
    assert (
        DeadLetter.objects.count() == 300 and Attempt.objects.count() <= max(attempts, 3000) + 150
    )
    assert Tenant.objects.count() == 6

    call_command("seed_demo", "--dead-letters", "350", "--attempts", "3000", stdout=StringIO())
    _assert_the_demo_data_it_promises(dead_letters=350)


@pytest.mark.django_db(transaction=True)
def test_the_demo_endpoints_sign_and_show_like_any_other(client, django_user_model):
    # Their secrets were stored in plain text: every demo endpoint's page was a 500
    # ("cannot decrypt a stored secret"), and nothing could be signed for them.
    call_command("seed_demo", "--dead-letters", "10", "--attempts", "100", stdout=StringIO())
    client.force_login(django_user_model.objects.create_user("s", is_staff=True))
    assert set(Endpoint.objects.values_list("pk", flat=True)) == set(DEMO_ENDPOINTS)
    for endpoint in Endpoint.objects.all():
        assert endpoint_signing_secrets(endpoint=endpoint)[0].startswith("whsec_")
        assert client.get(f"/endpoints/{endpoint.pk}/").status_code == 200
