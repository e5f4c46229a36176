"""`tls_client_certificate`: checked on save (400 naming the field with the reason),
write-only and stored encrypted; reads show only its subject, issuer and expiry."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from tests.certificates import Authority
from webhooks.models import Endpoint
from webhooks.services.endpoint_certificates import endpoint_certificate_decrypted

URL = "http://127.0.0.1:9/hooks"
FIELD = "tls_client_certificate"


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority()


def create(actor, **fields):
    return actor.client.post("/api/v1/endpoints", {"url": URL, **fields}, format="json")


def stored(endpoint_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tls_client_certificate FROM webhooks_endpoint WHERE id = %s", [endpoint_id]
        )
        return cursor.fetchone()[0]


def test_the_certificate_is_never_shown_back_only_its_subject_and_expiry(alice, authority):
    pem = authority.client_pem("alice-client")
    created = create(alice, tls_client_certificate=pem)
    assert created.status_code == 201, created.content
    body = created.json()
    info = body["tls_client_certificate_info"]
    assert info["subject"] == "CN=alice-client" and info["issuer"] == "CN=Homing Test CA"
    assert info["expires_at"].endswith("Z")
    detail = alice.client.get(f"/api/v1/endpoints/{body['id']}").json()
    listed = alice.client.get("/api/v1/endpoints").json()["results"]
    for shown in (body, detail, listed):
        text = json.dumps(shown)
        assert "PRIVATE KEY" not in text and "BEGIN CERTIFICATE" not in text
        assert FIELD + '"' not in text  # the write-only field itself is absent
    assert detail["tls_client_certificate_info"] == info
    assert "PRIVATE KEY" not in stored(body["id"])  # encrypted at rest


def test_an_endpoint_without_one_shows_null_and_a_patch_sets_keeps_and_removes_it(alice, authority):
    body = create(alice).json()
    assert body["tls_client_certificate_info"] is None
    path = f"/api/v1/endpoints/{body['id']}"
    pem = authority.client_pem("bob-client", rsa_traditional=True)  # BEGIN RSA PRIVATE KEY
    patched = alice.client.patch(path, {FIELD: pem}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["tls_client_certificate_info"]["subject"] == "CN=bob-client"
    kept = alice.client.patch(path, {"description": "other"}, format="json").json()
    assert kept["tls_client_certificate_info"]["subject"] == "CN=bob-client"
    removed = alice.client.patch(path, {FIELD: None}, format="json")
    assert removed.status_code == 200 and removed.json()["tls_client_certificate_info"] is None
    assert stored(body["id"]) == ""


def test_a_bad_certificate_is_refused_naming_the_field_and_the_reason(alice, authority):
    certificate, key = authority.issue("carol-client")
    _, other_key = authority.issue("someone-else")
    expired = authority.client_pem("old-client", valid_days=-1)
    cases = {
        "garbage": ("not a pem at all", "No PEM certificate"),
        "no key": (certificate, "exactly one PEM private key"),
        "broken certificate": (
            certificate.replace(certificate[100:140], "A" * 40) + key,
            "does not parse",
        ),
        "key mismatch": (certificate + other_key, "does not match"),
        "expired": (expired, "CN=old-client expired"),
        "a number": (42, "string"),
    }
    for case, (pem, reason) in cases.items():
        response = create(alice, tls_client_certificate=pem)
        assert response.status_code == 400, (case, response.content)
        text = response.content.decode()
        assert FIELD in text and reason in text, (case, text)
    assert Endpoint.objects.count() == 0


def test_the_key_rotation_reencrypts_the_certificate(alice, authority, settings):
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.HOMING_ENCRYPTION_KEY = [old_key]
    pem = authority.client_pem("dave-client")
    body = create(alice, tls_client_certificate=pem).json()
    before = stored(body["id"])
    settings.HOMING_ENCRYPTION_KEY = [new_key, old_key]
    call_command("rotate_encryption_key")
    settings.HOMING_ENCRYPTION_KEY = [new_key]  # the old key is gone
    after = stored(body["id"])
    assert after != before
    decrypted = endpoint_certificate_decrypted(stored=after)
    assert decrypted is not None
    assert decrypted.split("-----BEGIN")[1:] == pem.split("-----BEGIN")[1:]
