"""Endpoint signing secrets as Standard Webhooks writes them. Made here, where endpoints
are; deliveries/transport/signing.py reads them. No Django, so the signing code that
imports it stays pure.

- `hmac-sha256` (the default): `whsec_` + base64 of random bytes, the HMAC key.
- `ed25519`: `whsk_` + base64 of a 32-byte Ed25519 seed (RFC 8032's private key); the
  receiver verifies with its public key, `whpk_` + base64 of the 32 raw public-key bytes,
  so a leaked receiver-side key cannot forge webhooks.
"""

from __future__ import annotations

import base64
import binascii
import functools
import secrets

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SECRET_PREFIX = "whsec_"
SIGNING_KEY_PREFIX = "whsk_"
PUBLIC_KEY_PREFIX = "whpk_"

HMAC_SHA256 = "hmac-sha256"
ED25519 = "ed25519"
SIGNING_SCHEMES = (HMAC_SHA256, ED25519)

# The contract asks for 24+ bytes. 32 is SHA-256's output length, the minimum key
# length RFC 2104 recommends for HMAC; more would add nothing, and it stays inside the
# 24-64 bytes Standard Webhooks suggests.
SECRET_BYTES = 32
ED25519_SEED_BYTES = 32  # RFC 8032: an Ed25519 private key is a 32-byte seed


def generate_secret(signing: str = HMAC_SHA256) -> str:
    """A fresh secret for the scheme: `whsec_…` (HMAC) or `whsk_…` (Ed25519)."""
    if signing == ED25519:
        seed = secrets.token_bytes(ED25519_SEED_BYTES)
        return SIGNING_KEY_PREFIX + base64.b64encode(seed).decode("ascii")
    if signing != HMAC_SHA256:
        raise ValueError(f"unknown signing scheme {signing!r}")
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def signing_of(secret: str) -> str:
    """The scheme a stored secret signs with, read from its prefix."""
    return ED25519 if secret.startswith(SIGNING_KEY_PREFIX) else HMAC_SHA256


@functools.lru_cache(maxsize=4096)  # every Ed25519 attempt signs; a key never changes
def ed25519_private_key(secret: str) -> Ed25519PrivateKey:
    """The key of a `whsk_` secret; ValueError for one that is not 32 bytes of base64."""
    encoded = secret.removeprefix(SIGNING_KEY_PREFIX)
    encoded += "=" * (-len(encoded) % 4)
    try:
        seed = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"Ed25519 signing key is not valid base64: {exc}") from None
    if len(seed) != ED25519_SEED_BYTES:
        raise ValueError(f"an Ed25519 signing key is {ED25519_SEED_BYTES} bytes, not {len(seed)}")
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key(secret: str) -> str:
    """`whpk_` + base64 of the raw public key of a `whsk_` secret (for the receiver)."""
    raw = ed25519_private_key(secret).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode("ascii")
