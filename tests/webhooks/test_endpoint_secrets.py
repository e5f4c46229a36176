"""Endpoint secrets: shown on purpose only, encrypted in the table, rotated with grace."""

from __future__ import annotations

import json
import time
from datetime import timedelta

from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from homing_receiver import Webhook

from deliveries.transport.signing import webhook_headers
from webhooks.models import Endpoint
from webhooks.services.endpoints import endpoint_signing_secrets

URL = "http://127.0.0.1:9/hooks"


def create(actor):
    response = actor.client.post("/api/v1/endpoints", {"url": URL}, format="json")
    assert response.status_code == 201
    return response.json()


def stored_secret_column(endpoint_id):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT secret, previous_secrets::text FROM webhooks_endpoint WHERE id = %s",
            [endpoint_id],
        )
        return " ".join(cursor.fetchone())


def test_reads_and_lists_do_not_carry_the_secret(alice):
    created = create(alice)
    assert created["secret"].startswith("whsec_")
    detail = alice.client.get(f"/api/v1/endpoints/{created['id']}").json()
    listed = alice.client.get("/api/v1/endpoints").json()["results"]
    patched = alice.client.patch(
        f"/api/v1/endpoints/{created['id']}", {"description": "x"}, format="json"
    ).json()
    for body in (detail, listed[0], patched):
        assert "secret" not in body
        assert created["secret"] not in json.dumps(body)


def test_the_secret_is_shown_on_purpose(alice, bob):
    created = create(alice)
    shown = alice.client.get(f"/api/v1/endpoints/{created['id']}/secret")
    assert shown.status_code == 200 and shown.json() == {"secret": created["secret"]}
    assert bob.client.get(f"/api/v1/endpoints/{created['id']}/secret").status_code == 404


def test_the_table_holds_the_secret_encrypted(alice):
    created = create(alice)
    rotated = alice.client.post(f"/api/v1/endpoints/{created['id']}/rotate-secret").json()
    column = stored_secret_column(created["id"])
    for secret in (created["secret"], rotated["secret"]):
        assert secret not in column
        assert secret.removeprefix("whsec_") not in column
    assert "whsec_" not in column


def verifies(secret, signing_secrets):
    body = b'{"id":"evt_1","type":"a.b","data":{}}'
    headers = webhook_headers(
        msg_id="evt_1", timestamp=int(time.time()), body=body, secrets=signing_secrets
    )
    try:
        Webhook(secret).verify(body, headers)
    except Exception:
        return False
    return True


def test_two_rotations_within_the_grace_keep_every_secret_signing(alice):
    first = create(alice)["secret"]
    path = f"/api/v1/endpoints/{alice.tenant.endpoints.get().id}/rotate-secret"
    second = alice.client.post(path).json()["secret"]
    third = alice.client.post(path).json()["secret"]
    endpoint = Endpoint.objects.get()
    signing = endpoint_signing_secrets(endpoint=endpoint)
    assert signing[0] == third and set(signing) == {first, second, third}
    for secret in (first, second, third):
        assert verifies(secret, signing)


def test_a_secret_past_its_grace_stops_signing(alice):
    first = create(alice)["secret"]
    endpoint = Endpoint.objects.get()
    alice.client.post(f"/api/v1/endpoints/{endpoint.id}/rotate-secret")
    endpoint.refresh_from_db()
    endpoint.previous_secrets[0]["expires_at"] = (timezone.now() - timedelta(seconds=1)).isoformat()
    endpoint.save(update_fields=["previous_secrets"])
    signing = endpoint_signing_secrets(endpoint=endpoint)
    assert first not in signing and len(signing) == 1
    assert not verifies(first, signing)


def test_the_key_rotation_reencrypts_every_secret(alice, settings):
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.HOMING_ENCRYPTION_KEY = [old_key]
    created = create(alice)
    alice.client.post(f"/api/v1/endpoints/{created['id']}/rotate-secret")
    before = endpoint_signing_secrets(endpoint=Endpoint.objects.get())

    settings.HOMING_ENCRYPTION_KEY = [new_key, old_key]  # step 1: new key first
    call_command("rotate_encryption_key")  # step 2
    settings.HOMING_ENCRYPTION_KEY = [new_key]  # step 3: the old key is gone

    assert endpoint_signing_secrets(endpoint=Endpoint.objects.get()) == before
