"""Signing, OAuth2 auth and the client certificate in the consumer portal, in headless
Chromium against the live server: Carol sets each, the API shows what she set, and no
page ever carries her client secret or her certificate's PEM back.
Screenshots land in screenshots/transport-*.png (git-ignored)."""

from __future__ import annotations

import os

import pytest

from tests.browser import SHOTS
from tests.certificates import Authority
from tests.factories import portal_link_via_http
from webhooks.models import Endpoint
from webhooks.services.endpoint_auth import endpoint_auth_decrypted

pytestmark = pytest.mark.e2e

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CLIENT_SECRET = "carol-s3cret-value"


def shoot(page, name: str) -> None:
    page.screenshot(path=SHOTS / f"transport-{name}.png", full_page=True)


def assert_nothing_write_only(html: str, pem: str) -> None:
    """Neither the client secret nor any line of the certificate's or key's PEM body."""
    assert CLIENT_SECRET not in html
    body_lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    assert body_lines and not [line for line in body_lines if line in html]


def test_a_customer_sets_signing_auth_and_a_client_certificate_in_the_portal(
    browser, live_server, make_actor, tmp_path
):
    alice = make_actor("Alice Payments")
    endpoint = alice.client.post(
        "/api/v1/endpoints",
        {"url": "https://hooks.carol.example/in", "owner": "carol"},
        format="json",
    ).json()
    path = f"/api/v1/endpoints/{endpoint['id']}"
    authority = Authority("Carol CA")

    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(portal_link_via_http(live_server.url, alice.key, "carol"))
    page.wait_for_selector("h1:text('Your webhook endpoints')")
    page.click("text=hooks.carol.example")
    page.wait_for_selector("h2:text('Signing, auth and certificate')")
    assert page.inner_text("dd.signing") == "hmac-sha256"
    assert page.inner_text("dd.certificate") == "none"

    # Carol switches to Ed25519, adds OAuth2 client credentials and pastes a certificate.
    page.click("text=Edit signing, auth and certificate")
    page.select_option("select[name=signing]", "ed25519")
    page.select_option("select[name=auth_type]", "oauth2_client_credentials")
    page.fill("input[name=token_url]", "https://auth.carol.example/oauth/token")
    page.fill("input[name=client_id]", "homing-at-carol")
    page.fill("input[name=client_secret]", CLIENT_SECRET)
    page.fill("input[name=scope]", "webhooks:write")
    page.fill("input[name=audience]", "https://hooks.carol.example")
    pem = authority.client_pem("carol-client")
    page.fill("textarea[name=tls_client_certificate]", pem)
    shoot(page, "form-filled")
    page.click("button:text('Save')")
    page.wait_for_selector("text=Endpoint saved.")
    shoot(page, "endpoint")

    shown = alice.client.get(path).json()
    assert shown["signing"] == "ed25519"
    assert shown["auth"] == {
        "type": "oauth2_client_credentials",
        "token_url": "https://auth.carol.example/oauth/token",
        "client_id": "homing-at-carol",
        "scope": "webhooks:write",
        "audience": "https://hooks.carol.example",
    }
    assert shown["tls_client_certificate_info"]["subject"] == "CN=carol-client"
    public_key = alice.client.get(f"{path}/secret").json()["public_key"]
    assert page.inner_text("code.public-key") == public_key and public_key.startswith("whpk_")
    assert "CN=carol-client" in page.inner_text("dd.certificate")
    assert "client secret set" in page.inner_text("dd.auth")
    assert_nothing_write_only(page.content(), pem)

    # The form again: nothing write-only in it; saving it as it is keeps the secret.
    page.click("text=Edit signing, auth and certificate")
    assert_nothing_write_only(page.content(), pem)
    assert page.input_value("input[name=client_secret]") == ""
    assert page.input_value("input[name=client_id]") == "homing-at-carol"
    page.click("button:text('Save')")
    page.wait_for_selector("text=Endpoint saved.")
    stored = endpoint_auth_decrypted(auth=Endpoint.objects.get(pk=endpoint["id"]).auth)
    assert stored is not None and stored["client_secret"] == CLIENT_SECRET

    # A certificate that does not parse is refused on its field; nothing changes.
    page.click("text=Edit signing, auth and certificate")
    page.fill("textarea[name=tls_client_certificate]", "-----BEGIN CERTIFICATE-----\nnope")
    page.click("button:text('Save')")
    page.wait_for_selector(".field-error")
    assert "No PEM certificate" in page.inner_text(".transport-form")
    shoot(page, "refused")
    assert page.input_value("textarea[name=tls_client_certificate]") == ""

    # A PEM file uploaded instead replaces the certificate.
    upload = tmp_path / "carol-2.pem"
    upload.write_text(authority.client_pem("carol-client-2"))
    page.set_input_files("input[name=tls_client_certificate_file]", str(upload))
    page.click("button:text('Save')")
    page.wait_for_selector("text=Endpoint saved.")
    info = alice.client.get(path).json()["tls_client_certificate_info"]
    assert info["subject"] == "CN=carol-client-2"

    # Remove the certificate, then the auth.
    page.click("button:text('Remove certificate')")
    page.wait_for_selector("text=Client certificate removed.")
    assert alice.client.get(path).json()["tls_client_certificate_info"] is None
    page.click("text=Edit signing, auth and certificate")
    page.select_option("select[name=auth_type]", "")
    page.click("button:text('Save')")
    page.wait_for_selector("text=Endpoint saved.")
    final = alice.client.get(path).json()
    assert final["auth"] is None and final["signing"] == "ed25519"
    shoot(page, "cleared")
