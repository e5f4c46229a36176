"""`v1a` (Ed25519) verification with a `whpk_` public key.

The vector: RFC 8032 section 7.1's TEST 1 key as `whsk_`/`whpk_`, signing the Standard
Webhooks specification's message (tests/deliveries/transport/test_signing.py pins the
same vector against the sender). Messages signed here are signed with `cryptography`
directly, as any Standard Webhooks sender would.
"""

from __future__ import annotations

import base64
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from homing_receiver import Webhook, WebhookVerificationError

SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
V1A_PUBLIC_KEY = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
V1A_SIGNATURE = (
    "v1a,fldxM4gAKugP6nnt1hdz3sgGfZ6d99nzrMFnZOELIxbzEHoVmAb2ADpkJK7zgPePmPsle0zV9jSeGlHFG2NVAw=="
)
BODY = b'{"type":"invoice.paid","data":{"id":"inv_1"}}'


def whpk(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "whpk_" + base64.b64encode(raw).decode()


def signed(key: Ed25519PrivateKey, body: bytes, *, msg_id: str = "msg_1") -> dict[str, str]:
    timestamp = str(int(time.time()))
    signature = key.sign(f"{msg_id}.{timestamp}.".encode() + body)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": timestamp,
        "webhook-signature": "v1a," + base64.b64encode(signature).decode(),
    }


def test_it_verifies_the_v1a_vector_at_its_own_time() -> None:
    webhook = Webhook(V1A_PUBLIC_KEY, now=lambda: SPEC_TIMESTAMP)
    headers = {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": V1A_SIGNATURE,
    }
    assert webhook.verify(SPEC_BODY, headers) == {"test": 2432232314}
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        webhook.verify(SPEC_BODY.replace(b"2", b"3"), headers)


def test_it_verifies_a_message_signed_with_the_matching_private_key() -> None:
    key = Ed25519PrivateKey.generate()
    assert Webhook(whpk(key)).verify(BODY, signed(key, BODY))["type"] == "invoice.paid"


def test_it_refuses_another_keys_signature_and_a_tampered_body() -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(whpk(other)).verify(BODY, signed(key, BODY))
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(whpk(key)).verify(BODY + b" ", signed(key, BODY))


def test_a_public_key_ignores_v1_entries_and_finds_its_v1a_among_several() -> None:
    key, old = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    headers = signed(key, BODY)
    extra = signed(old, BODY, msg_id="msg_1")["webhook-signature"]
    hmac_entry = "v1," + base64.b64encode(b"x" * 32).decode()
    headers["webhook-signature"] = f"{hmac_entry} {extra} v1a,%%% {headers['webhook-signature']}"
    assert Webhook(whpk(key)).verify(BODY, headers)
    only_v1 = {**headers, "webhook-signature": hmac_entry}
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(whpk(key)).verify(BODY, only_v1)


def test_a_v1_secret_does_not_accept_a_v1a_signature() -> None:
    key = Ed25519PrivateKey.generate()
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook("whsec_" + base64.b64encode(b"k" * 24).decode()).verify(BODY, signed(key, BODY))


def test_it_still_checks_the_timestamp() -> None:
    webhook = Webhook(V1A_PUBLIC_KEY)  # today: the vector is years old
    headers = {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": V1A_SIGNATURE,
    }
    with pytest.raises(WebhookVerificationError, match="too old"):
        webhook.verify(SPEC_BODY, headers)


@pytest.mark.parametrize(
    "bad", ["whpk_", "whpk_%%%", "whpk_" + base64.b64encode(b"k" * 31).decode()]
)
def test_it_refuses_an_unusable_public_key(bad: str) -> None:
    with pytest.raises(ValueError):
        Webhook(bad)


def test_a_public_key_cannot_sign() -> None:
    with pytest.raises(ValueError, match="verifies"):
        Webhook(V1A_PUBLIC_KEY).sign("msg_1", time.time(), BODY)
