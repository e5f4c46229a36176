"""Standard Webhooks signing (https://www.standardwebhooks.com/), pure (no Django).

`v1` is HMAC-SHA256 with a `whsec_` secret (stdlib); `v1a` is Ed25519 with a `whsk_`
signing key (the `cryptography` package, already a dependency for encryption at rest).

Hand-rolled rather than wrapping the `standardwebhooks` package: its `sign()` takes a
datetime and a *str* body, which would make us decode and re-encode every payload, and
the whole algorithm is one HMAC. The tests pin the spec's vector and check that the
`standardwebhooks` and `svix` packages verify our output, so we cannot drift from it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from webhooks.secrets import SECRET_PREFIX, SIGNING_KEY_PREFIX, ed25519_private_key


@functools.lru_cache(maxsize=4096)  # every attempt signs; a secret's key never changes
def secret_key(secret: str) -> bytes:
    """The HMAC key: the base64-decoded part after `whsec_`.

    Raises ValueError for a secret that is not valid base64 or is empty, so a corrupt
    secret fails loudly instead of signing with a wrong key.
    """
    encoded = secret.removeprefix(SECRET_PREFIX)
    encoded += "=" * (-len(encoded) % 4)  # tolerate unpadded base64, as verifiers do
    try:
        key = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"webhook secret is not valid base64: {exc}") from None
    if not key:
        raise ValueError("webhook secret is empty")
    return key


def sign(*, msg_id: str, timestamp: int, body: bytes, secrets: Sequence[str]) -> str:
    """The `webhook-signature` value: one entry per secret, space-separated: `v1,<sig>`
    for a `whsec_` secret, `v1a,<sig>` for a `whsk_` signing key.

    Several secrets happen during rotation (and while an endpoint changes its scheme, the
    old scheme's secret keeps signing through the grace); receivers accept any match.
    """
    if not secrets:
        raise ValueError("at least one secret is needed to sign")
    # Sign bytes, not text: the receiver hashes exactly the bytes it received.
    signed = f"{msg_id}.{int(timestamp)}.".encode() + body
    if len(secrets) == 1:  # outside a rotation, every attempt: no generator to run
        return _signature(secrets[0], signed)
    return " ".join(_signature(s, signed) for s in secrets)


def _signature(secret: str, signed: bytes) -> str:
    if secret.startswith(SIGNING_KEY_PREFIX):
        return "v1a," + base64.b64encode(ed25519_private_key(secret).sign(signed)).decode()
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


# The delivery's number among its endpoint's (CONTRACT section 3): not signed, like the
# other transport headers; a receiver uses it only to find gaps it then fetches.
SEQUENCE_HEADER = "homing-sequence"


def webhook_headers(
    *, msg_id: str, timestamp: int, body: bytes, secrets: Sequence[str]
) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(timestamp)),
        "webhook-signature": sign(msg_id=msg_id, timestamp=timestamp, body=body, secrets=secrets),
    }


def payload_bytes(*, event_id: str, event_type: str, timestamp_iso: str, data: Any) -> bytes:
    """The webhook body, byte-identical on every attempt of an event.

    Compact separators and a fixed key order make it deterministic; non-ASCII text is
    kept as UTF-8 rather than \\u escapes (smaller, and what receivers log).
    """
    envelope = {"id": event_id, "type": event_type, "timestamp": timestamp_iso, "data": data}
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
