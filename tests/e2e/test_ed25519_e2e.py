"""Real worker, real receiver: an Ed25519 endpoint's webhooks verify with its public key,
checked by a verifier written from the Standard Webhooks specification (and by the
receiver library)."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from homing_receiver import Webhook

from tests.factories import delivery_of, endpoint_via_api, event_via_api
from tests.processes import wait_until

pytestmark = pytest.mark.e2e


def spec_verifies(public_key: str, body: bytes, headers: dict[str, str]) -> bool:
    """The specification's `v1a` check, written out: any `v1a,<base64>` entry of
    webhook-signature is an Ed25519 signature of `{id}.{timestamp}.{body}` by the key
    whose 32 raw bytes follow `whpk_` in base64."""
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_")))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    for entry in headers["webhook-signature"].split(" "):
        version, _, signature = entry.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(signature), signed)
        except Exception:
            continue
        return True
    return False


def test_an_ed25519_endpoint_signs_v1a_that_its_public_key_verifies(
    alice, homing, receiver_factory
):
    receiver = receiver_factory()
    endpoint = endpoint_via_api(alice, receiver.url, signing="ed25519")
    homing("worker")
    event = event_via_api(alice, data={"amount": 4200})

    [request] = receiver.wait_for(1)
    assert request.headers["webhook-signature"].startswith("v1a,")
    assert " " not in request.headers["webhook-signature"]  # one key, one signature
    assert spec_verifies(endpoint["public_key"], request.body, request.headers)
    assert (
        Webhook(endpoint["public_key"]).verify(request.body, request.headers)["id"] == event["id"]
    )
    wait_until(lambda: delivery_of(event).status == "succeeded")


def test_during_a_rotation_both_public_keys_verify(alice, homing, receiver_factory):
    receiver = receiver_factory()
    endpoint = endpoint_via_api(alice, receiver.url, signing="ed25519")
    rotated = alice.client.post(f"/api/v1/endpoints/{endpoint['id']}/rotate-secret").json()
    homing("worker")
    event_via_api(alice)
    [request] = receiver.wait_for(1)
    assert [e.split(",")[0] for e in request.headers["webhook-signature"].split(" ")] == [
        "v1a",
        "v1a",
    ]
    for public_key in (endpoint["public_key"], rotated["public_key"]):
        assert spec_verifies(public_key, request.body, request.headers)
