"""Custom header values (often credentials) are stored encrypted, like secrets, and the
tenant still reads and writes them in plain text."""

from __future__ import annotations

from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from tests.migrations import latest, migrate
from webhooks.models import Endpoint
from webhooks.services.endpoints import endpoint_headers

TOKEN = "Bearer alice-very-secret-token-42"


def raw_headers(endpoint_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT headers::text FROM webhooks_endpoint WHERE id = %s", [endpoint_id])
        return cursor.fetchone()[0]


def test_the_stored_column_holds_no_plain_value_and_the_api_shows_it(alice):
    created = alice.client.post(
        "/api/v1/endpoints",
        {"url": "http://127.0.0.1:9/h", "headers": {"Authorization": TOKEN}},
        format="json",
    )
    assert created.status_code == 201 and created.json()["headers"] == {"Authorization": TOKEN}
    endpoint_id = created.json()["id"]
    assert "alice-very-secret" not in raw_headers(endpoint_id)
    assert "Authorization" in raw_headers(endpoint_id)  # names stay readable
    shown = alice.client.get(f"/api/v1/endpoints/{endpoint_id}").json()
    assert shown["headers"] == {"Authorization": TOKEN}
    listed = alice.client.get("/api/v1/endpoints").json()["results"]
    assert listed[0]["headers"] == {"Authorization": TOKEN}

    changed = alice.client.patch(
        f"/api/v1/endpoints/{endpoint_id}", {"headers": {"X-Api-Key": "k-7781"}}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["headers"] == {"X-Api-Key": "k-7781"}
    assert "k-7781" not in raw_headers(endpoint_id)
    assert endpoint_headers(endpoint=Endpoint.objects.get(pk=endpoint_id)) == {
        "X-Api-Key": "k-7781"
    }


def test_the_key_rotation_reencrypts_header_values(alice, settings):
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.HOMING_ENCRYPTION_KEY = [old_key]
    created = alice.client.post(
        "/api/v1/endpoints",
        {"url": "http://127.0.0.1:9/h", "headers": {"Authorization": TOKEN}},
        format="json",
    ).json()
    settings.HOMING_ENCRYPTION_KEY = [new_key, old_key]
    call_command("rotate_encryption_key")
    settings.HOMING_ENCRYPTION_KEY = [new_key]  # the old key is gone
    shown = alice.client.get(f"/api/v1/endpoints/{created['id']}").json()
    assert shown["headers"] == {"Authorization": TOKEN}


def test_the_migration_encrypts_existing_plain_header_values(transactional_db):
    old_apps = migrate([("webhooks", "0006_routing_version")])
    tenant = old_apps.get_model("webhooks", "Tenant").objects.create(id="ten_h", name="h")
    old_apps.get_model("webhooks", "Endpoint").objects.create(
        id="ep_h",
        tenant=tenant,
        url="https://example.com/h",
        secret="x",
        headers={"Authorization": TOKEN},
    )
    assert "alice-very-secret" in raw_headers("ep_h")

    migrate([("webhooks", "0009_encrypt_headers")])
    migrate(latest())

    assert "alice-very-secret" not in raw_headers("ep_h")
    assert endpoint_headers(endpoint=Endpoint.objects.get(pk="ep_h")) == {"Authorization": TOKEN}
