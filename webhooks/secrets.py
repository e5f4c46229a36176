"""Endpoint signing secrets as Standard Webhooks writes them: `whsec_` + base64 of random
bytes. Made here, where endpoints are; deliveries/transport/signing.py reads them. Stdlib only, so
the signing code that imports it stays pure."""

from __future__ import annotations

import base64
import secrets

SECRET_PREFIX = "whsec_"

# The contract asks for 24+ bytes. 32 is SHA-256's output length, the minimum key
# length RFC 2104 recommends for HMAC; more would add nothing, and it stays inside the
# 24-64 bytes Standard Webhooks suggests.
SECRET_BYTES = 32


def generate_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")
