"""The console's signing / auth / client certificate page: Olivia (staff, allowed to change
endpoints) sets each and the API shows it; the write-only values never come back in a
page; a staff user without the permission sees no control and gets 403 posting."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.certificates import Authority
from tests.factories import endpoint_id_via_api

SECRET = "olivia-client-s3cret"


@pytest.fixture
def olivia(db) -> Client:
    user = User.objects.create_user("olivia", "o@example.com", "pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="change_endpoint"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_user("vic", "v@example.com", "pw", is_staff=True))
    return client


def form(**overrides):
    return {
        "signing": "ed25519",
        "auth_type": "oauth2_client_credentials",
        "token_url": "https://auth.example.com/token",
        "client_id": "homing",
        "client_secret": SECRET,
        "scope": "",
        "audience": "",
        "tls_client_certificate": "",
        **overrides,
    }


def test_staff_set_signing_auth_and_a_certificate_and_the_api_shows_them(alice, olivia):
    pem = Authority().client_pem("alice-client")
    endpoint_id = endpoint_id_via_api(alice)
    page = f"/endpoints/{endpoint_id}/transport"
    upload = SimpleUploadedFile("client.pem", pem.encode())
    saved = olivia.post(page, {**form(), "tls_client_certificate_file": upload})
    assert saved.status_code == 302, saved.content.decode()[-2000:]

    shown = alice.client.get(f"/api/v1/endpoints/{endpoint_id}").json()
    assert shown["signing"] == "ed25519"
    assert shown["auth"]["client_id"] == "homing"
    assert shown["tls_client_certificate_info"]["subject"] == "CN=alice-client"
    public_key = alice.client.get(f"/api/v1/endpoints/{endpoint_id}/secret").json()["public_key"]
    for html in (olivia.get(f"/endpoints/{endpoint_id}/").content, olivia.get(page).content):
        text = html.decode()
        assert SECRET not in text and pem.splitlines()[1] not in text
        assert pem.splitlines()[-2] not in text  # the key's last line
    detail = olivia.get(f"/endpoints/{endpoint_id}/").content.decode()
    assert public_key in detail and "CN=alice-client" in detail

    # A key that is not the certificate's: refused on the field, nothing changed.
    other = Authority().client_pem("mallory")
    mismatched = pem.split("-----BEGIN PRIVATE KEY")[0] + other[other.index("-----BEGIN PRIV") :]
    refused = olivia.post(page, form(tls_client_certificate=mismatched))
    assert refused.status_code == 200 and "does not match" in refused.content.decode()
    assert other.splitlines()[-2] not in refused.content.decode()

    removed = olivia.post(page, {"remove_certificate": "1"})
    assert removed.status_code == 302
    assert (
        alice.client.get(f"/api/v1/endpoints/{endpoint_id}").json()["tls_client_certificate_info"]
        is None
    )


def test_staff_without_the_permission_see_no_control_and_cannot_post(alice, viewer):
    endpoint_id = endpoint_id_via_api(alice)
    detail = viewer.get(f"/endpoints/{endpoint_id}/").content.decode()
    assert "Signing, auth and certificate" in detail
    assert "Edit signing, auth and certificate" not in detail
    assert viewer.post(f"/endpoints/{endpoint_id}/transport", form()).status_code == 403
