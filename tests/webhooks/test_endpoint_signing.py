"""`signing`: an Ed25519 endpoint signs `v1a` with a `whsk_` key whose `whpk_` public key
its receiver verifies with; changing the scheme or rotating keeps the old one signing."""

from __future__ import annotations

import json
import time

from homing_receiver import Webhook

from deliveries.transport.signing import webhook_headers
from webhooks.models import Endpoint
from webhooks.services.endpoints import endpoint_signing_secrets

URL = "http://127.0.0.1:9/hooks"
BODY = b'{"id":"evt_1","type":"a.b","data":{}}'


def create(actor, **fields):
    response = actor.client.post("/api/v1/endpoints", {"url": URL, **fields}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def verifies(key: str, endpoint_id: str) -> bool:
    """Whether a receiver holding `key` accepts what the endpoint signs now."""
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    headers = webhook_headers(
        msg_id="evt_1",
        timestamp=int(time.time()),
        body=BODY,
        secrets=endpoint_signing_secrets(endpoint=endpoint),
    )
    try:
        Webhook(key).verify(BODY, headers)
    except Exception:
        return False
    return True


def test_an_ed25519_endpoint_gets_a_whsk_key_and_its_receiver_the_whpk_key(alice, bob):
    created = create(alice, signing="ed25519")
    assert created["signing"] == "ed25519" and created["secret"].startswith("whsk_")
    assert created["public_key"].startswith("whpk_")
    shown = alice.client.get(f"/api/v1/endpoints/{created['id']}/secret").json()
    assert shown == {"secret": created["secret"], "public_key": created["public_key"]}
    assert verifies(shown["public_key"], created["id"])
    assert bob.client.get(f"/api/v1/endpoints/{created['id']}/secret").status_code == 404


def test_an_hmac_endpoint_is_the_default_and_has_no_public_key(alice):
    created = create(alice)
    assert created["signing"] == "hmac-sha256" and created["secret"].startswith("whsec_")
    assert "public_key" not in created
    assert alice.client.get(f"/api/v1/endpoints/{created['id']}/secret").json() == {
        "secret": created["secret"]
    }


def test_the_signing_key_is_stored_encrypted_and_never_read_back(alice):
    created = create(alice, signing="ed25519")
    detail = alice.client.get(f"/api/v1/endpoints/{created['id']}").json()
    assert created["secret"] not in json.dumps(detail) and "public_key" not in detail
    stored = Endpoint.objects.get(pk=created["id"]).secret
    assert "whsk_" not in stored and created["secret"].removeprefix("whsk_") not in stored


def test_rotating_an_ed25519_key_keeps_the_old_one_signing_through_the_grace(alice):
    created = create(alice, signing="ed25519")
    rotated = alice.client.post(f"/api/v1/endpoints/{created['id']}/rotate-secret").json()
    assert rotated["secret"].startswith("whsk_") and rotated["public_key"] != created["public_key"]
    assert verifies(created["public_key"], created["id"])
    assert verifies(rotated["public_key"], created["id"])


def test_changing_the_scheme_makes_a_new_secret_and_the_old_one_keeps_signing(alice):
    created = create(alice)
    patched = alice.client.patch(
        f"/api/v1/endpoints/{created['id']}", {"signing": "ed25519"}, format="json"
    )
    assert patched.status_code == 200 and patched.json()["signing"] == "ed25519"
    shown = alice.client.get(f"/api/v1/endpoints/{created['id']}/secret").json()
    assert shown["secret"].startswith("whsk_")
    assert verifies(created["secret"], created["id"])  # v1, in its grace
    assert verifies(shown["public_key"], created["id"])  # v1a
    same = alice.client.patch(
        f"/api/v1/endpoints/{created['id']}", {"signing": "ed25519"}, format="json"
    )
    assert same.status_code == 200
    assert alice.client.get(f"/api/v1/endpoints/{created['id']}/secret").json() == shown


def test_an_unknown_scheme_is_refused_naming_the_field(alice):
    response = alice.client.post("/api/v1/endpoints", {"url": URL, "signing": "rsa"}, format="json")
    assert response.status_code == 400 and "signing" in response.content.decode()
