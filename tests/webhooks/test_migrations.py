"""The data migration that encrypts the secrets stored in plain text before it."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from tests.migrations import latest, migrate
from webhooks.models import Endpoint
from webhooks.secrets import generate_secret
from webhooks.services.endpoints import endpoint_signing_secrets

BEFORE = [("webhooks", "0002_delete_counter")]
AFTER = [("webhooks", "0003_encrypt_secrets_keyset_indexes")]


def test_it_encrypts_plain_secrets_and_keeps_a_rotation_in_grace(transactional_db):
    old_apps = migrate(BEFORE)
    tenant = old_apps.get_model("webhooks", "Tenant").objects.create(id="ten_m", name="m")
    current, previous = generate_secret(), generate_secret()
    old_apps.get_model("webhooks", "Endpoint").objects.create(
        id="ep_m",
        tenant=tenant,
        url="https://example.com/h",
        secret=current,
        previous_secret=previous,
        previous_secret_expires_at=timezone.now() + timedelta(hours=1),
    )

    migrate(AFTER)
    # Then on to the latest schema, which the current models (read below) describe.
    migrate(latest())

    with connection.cursor() as cursor:
        cursor.execute("SELECT secret, previous_secrets::text FROM webhooks_endpoint")
        stored = " ".join(cursor.fetchone())
    assert current not in stored and previous not in stored
    assert endpoint_signing_secrets(endpoint=Endpoint.objects.get(pk="ep_m")) == [
        current,
        previous,
    ]
