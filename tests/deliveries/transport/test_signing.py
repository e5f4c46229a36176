"""Signing follows Standard Webhooks exactly: the spec's vector, and the PyPI verifiers."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
import standardwebhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from svix.webhooks import Webhook as SvixWebhook
from svix.webhooks import WebhookVerificationError as SvixVerificationError

from deliveries.transport.signing import (
    payload_bytes,
    secret_key,
    sign,
    webhook_headers,
)
from webhooks.secrets import ed25519_private_key, generate_secret, public_key

SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def signed_now(body: bytes, secrets: list[str]) -> dict[str, str]:
    # standardwebhooks rejects timestamps more than 5 minutes from now.
    return webhook_headers(msg_id="evt_1", timestamp=int(time.time()), body=body, secrets=secrets)


def test_it_matches_the_spec_vector() -> None:
    signature = sign(
        msg_id=SPEC_ID, timestamp=SPEC_TIMESTAMP, body=SPEC_BODY, secrets=[SPEC_SECRET]
    )
    assert signature == SPEC_SIGNATURE


def test_headers_carry_id_timestamp_and_signature() -> None:
    headers = webhook_headers(
        msg_id=SPEC_ID, timestamp=SPEC_TIMESTAMP, body=SPEC_BODY, secrets=[SPEC_SECRET]
    )
    assert headers == {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": "1614265330",
        "webhook-signature": SPEC_SIGNATURE,
    }


def test_standardwebhooks_verifies_our_signature() -> None:
    secret = generate_secret()
    body = payload_bytes(
        event_id="evt_1",
        event_type="order.paid",
        timestamp_iso="2024-05-01T12:00:00Z",
        data={"amount": 42},
    )
    parsed = standardwebhooks.Webhook(secret).verify(body, signed_now(body, [secret]))
    assert parsed["data"] == {"amount": 42}


def test_svix_verifies_our_signature() -> None:
    secret = generate_secret()
    body = b'{"id":"evt_1","type":"order.paid","timestamp":"2024-05-01T12:00:00Z","data":{}}'
    SvixWebhook(secret).verify(body, signed_now(body, [secret]))  # raises if wrong
    with pytest.raises(SvixVerificationError):
        SvixWebhook(generate_secret()).verify(body, signed_now(body, [secret]))


def test_during_rotation_each_secret_verifies_alone() -> None:
    old, new = generate_secret(), generate_secret()
    body = b'{"rotating":true}'
    headers = signed_now(body, [old, new])
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        standardwebhooks.Webhook(secret).verify(body, headers)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(generate_secret()).verify(body, headers)


def test_a_tampered_body_fails_verification() -> None:
    secret = generate_secret()
    headers = signed_now(b'{"amount":42}', [secret])
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(secret).verify(b'{"amount":43}', headers)


def test_the_signature_covers_the_exact_bytes_of_non_ascii_bodies() -> None:
    secret = generate_secret()
    body = payload_bytes(
        event_id="evt_é",
        event_type="café.ordered",
        timestamp_iso="2024-05-01T12:00:00Z",
        data={"name": "Zoë ☕"},
    )
    headers = webhook_headers(
        msg_id="evt_é", timestamp=int(time.time()), body=body, secrets=[secret]
    )
    assert standardwebhooks.Webhook(secret).verify(body, headers)["data"] == {"name": "Zoë ☕"}


def test_generated_secrets_are_whsec_base64_of_32_random_bytes() -> None:
    secrets = {generate_secret() for _ in range(100)}
    assert len(secrets) == 100
    for secret in secrets:
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_a_secret_that_is_not_base64_is_refused() -> None:
    with pytest.raises(ValueError, match="base64"):
        secret_key("whsec_not base64!")
    with pytest.raises(ValueError, match="empty"):
        secret_key("whsec_")
    with pytest.raises(ValueError, match="at least one secret"):
        sign(msg_id="m", timestamp=1, body=b"", secrets=[])


def test_unpadded_secrets_decode_like_the_verifiers_do() -> None:
    secret = generate_secret().rstrip("=")
    headers = signed_now(b"{}", [secret])
    standardwebhooks.Webhook(secret).verify(b"{}", headers)


def test_the_payload_is_compact_ordered_utf8_json() -> None:
    body = payload_bytes(
        event_id="evt_1",
        event_type="order.paid",
        timestamp_iso="2024-05-01T12:00:00Z",
        data={"b": 1, "a": [1, 2], "text": "naïve"},
    )
    assert (
        body
        == (
            '{"id":"evt_1","type":"order.paid","timestamp":"2024-05-01T12:00:00Z",'
            '"data":{"b":1,"a":[1,2],"text":"naïve"}}'
        ).encode()
    )
    assert json.loads(body)["data"]["text"] == "naïve"


def test_the_payload_is_identical_on_every_call() -> None:
    kwargs: dict[str, Any] = {
        "event_id": "evt_1",
        "event_type": "t",
        "timestamp_iso": "x",
        "data": {"z": 1, "a": {"nested": [None, True, 1.5]}},
    }
    assert payload_bytes(**kwargs) == payload_bytes(**kwargs)


# --- v1a: Ed25519 (Standard Webhooks' asymmetric scheme) ----------------------------------
# The vector is built from the specifications, not from our own output: RFC 8032 section
# 7.1's TEST 1 key (seed 9d61…7f60, public key d75a…511a) written as `whsk_`/`whpk_`, and
# the Standard Webhooks message above signed with it. Ed25519 is deterministic, so the
# signature is fixed; the `cryptography` package verifies it against the RFC's public key.
RFC8032_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
V1A_SIGNING_KEY = "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
V1A_PUBLIC_KEY = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
V1A_SIGNATURE = (
    "v1a,fldxM4gAKugP6nnt1hdz3sgGfZ6d99nzrMFnZOELIxbzEHoVmAb2ADpkJK7zgPePmPsle0zV9jSeGlHFG2NVAw=="
)


def test_the_v1a_keys_are_the_rfc_8032_key_in_standard_webhooks_form() -> None:
    assert "whsk_" + base64.b64encode(RFC8032_SEED).decode() == V1A_SIGNING_KEY
    assert "whpk_" + base64.b64encode(RFC8032_PUBLIC).decode() == V1A_PUBLIC_KEY
    assert public_key(V1A_SIGNING_KEY) == V1A_PUBLIC_KEY
    # RFC 8032 TEST 1: the empty message's signature, so the seed is read as the RFC does.
    assert ed25519_private_key(V1A_SIGNING_KEY).sign(b"").hex() == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e3970"
        "1cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )


def test_it_matches_the_v1a_vector() -> None:
    signature = sign(
        msg_id=SPEC_ID, timestamp=SPEC_TIMESTAMP, body=SPEC_BODY, secrets=[V1A_SIGNING_KEY]
    )
    assert signature == V1A_SIGNATURE


def test_cryptography_verifies_the_v1a_vector_with_the_rfc_public_key() -> None:
    _, _, encoded = V1A_SIGNATURE.partition(",")
    signed = f"{SPEC_ID}.{SPEC_TIMESTAMP}.".encode() + SPEC_BODY
    Ed25519PublicKey.from_public_bytes(RFC8032_PUBLIC).verify(base64.b64decode(encoded), signed)
    with pytest.raises(InvalidSignature):
        Ed25519PublicKey.from_public_bytes(RFC8032_PUBLIC).verify(
            base64.b64decode(encoded), signed + b" "
        )


def test_generated_signing_keys_are_whsk_base64_of_a_32_byte_seed() -> None:
    keys = {generate_secret("ed25519") for _ in range(50)}
    assert len(keys) == 50
    for key in keys:
        assert key.startswith("whsk_")
        assert len(base64.b64decode(key.removeprefix("whsk_"), validate=True)) == 32
        assert public_key(key).startswith("whpk_")


def test_a_scheme_change_signs_with_both_schemes_during_the_grace() -> None:
    old, new = generate_secret(), generate_secret("ed25519")
    headers = signed_now(b"{}", [new, old])
    v1a, v1 = headers["webhook-signature"].split(" ")
    assert v1a.startswith("v1a,") and v1.startswith("v1,")
    standardwebhooks.Webhook(old).verify(b"{}", headers)  # it skips the v1a entry


def test_an_ed25519_key_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        sign(msg_id="m", timestamp=1, body=b"", secrets=["whsk_" + "A" * 40])
