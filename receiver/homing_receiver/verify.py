"""Standard Webhooks signature verification (https://www.standardwebhooks.com/).

A sender signs ``f"{webhook-id}.{webhook-timestamp}.{body}"`` with HMAC-SHA256 keyed
by the base64-decoded secret and sends ``webhook-signature: v1,<base64> [v1,<base64>…]``
(several entries while a secret is being rotated).

An Ed25519 sender (``v1a``) signs the same string with its private ``whsk_`` key and
sends ``v1a,<base64 signature>``; a receiver given the public key (``whpk_`` + base64 of
its 32 raw bytes) checks those entries instead. That needs the ``cryptography`` package
(``pip install 'homing-receiver[ed25519]'``), imported only when such a key is used.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from homing_receiver.errors import WebhookVerificationError

SECRET_PREFIX = "whsec_"
PUBLIC_KEY_PREFIX = "whpk_"
ED25519_PUBLIC_KEY_BYTES = 32
ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
REQUIRED_HEADERS = (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)

# A dict, Django's request.headers, a WSGI environ (HTTP_WEBHOOK_ID keys), or a list
# of (name, value) pairs such as an ASGI scope's bytes headers.
HeadersLike = Mapping[str, Any] | Iterable[tuple[Any, Any]]

# Bounded so a hostile header cannot make int() chew on thousands of digits.
_INTEGER = re.compile(r"[0-9]{1,15}")


def _decode_secret(secret: str | bytes) -> bytes:
    # bytes are the raw HMAC key; a str is base64, with or without the whsec_ prefix.
    if isinstance(secret, bytes):
        key = secret
    else:
        text = secret.strip().removeprefix(SECRET_PREFIX)
        # Some senders strip base64 padding; put it back instead of failing.
        text += "=" * (-len(text) % 4)
        try:
            key = base64.b64decode(text, validate=True)
        except binascii.Error:
            raise ValueError(
                "Webhook secret is not valid base64 (expected whsec_<base64>)"
            ) from None
    if not key:
        raise ValueError("Webhook secret must not be empty")
    return key


def _as_text(value: Any) -> str | None:
    if isinstance(value, bytes):
        # HTTP header bytes are latin-1 by definition (ASGI passes them raw).
        return value.decode("latin-1")
    return value if isinstance(value, str) else None


def _normalise_name(name: str) -> str:
    name = name.lower()
    if name.startswith("http_"):
        # WSGI environ spelling: HTTP_WEBHOOK_ID -> webhook-id.
        name = name[5:].replace("_", "-")
    return name


def extract_headers(
    headers: HeadersLike, names: Iterable[str] = REQUIRED_HEADERS
) -> dict[str, str]:
    """Return the headers called *names* (lower case) found in *headers*, by lower-case name.

    By default the three Standard Webhooks headers.
    """
    wanted = frozenset(names)
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found: dict[str, str] = {}
    for raw_name, raw_value in pairs:
        name, value = _as_text(raw_name), _as_text(raw_value)
        if name is None or value is None:
            continue  # e.g. wsgi.input in an environ
        name = _normalise_name(name)
        if name in wanted and name not in found:
            found[name] = value.strip()
    return found


class Webhook:
    """Verifies (and, for tests and tools, signs) Standard Webhooks messages.

    ``now`` returns the current Unix time; it exists so tests can pin the clock.
    """

    def __init__(
        self,
        secret: str | bytes,
        tolerance: int = 300,
        *,
        now: Callable[[], float] = time.time,
    ) -> None:
        if tolerance < 0:
            raise ValueError("tolerance must not be negative")
        self._public_key: Any = None
        self._key = b""
        if isinstance(secret, str) and secret.strip().startswith(PUBLIC_KEY_PREFIX):
            self._public_key = _ed25519_public_key(secret.strip())
        else:
            self._key = _decode_secret(secret)
        self.tolerance = tolerance
        self._now = now

    def sign(self, msg_id: str, timestamp: float | datetime, body: bytes | str) -> str:
        """Return a ``v1,<base64>`` signature for a message, as a sender would send it."""
        if self._public_key is not None:
            raise ValueError("a whpk_ public key verifies signatures; only its sender signs")
        if isinstance(timestamp, datetime):
            timestamp = timestamp.timestamp()
        return "v1," + base64.b64encode(self._digest(msg_id, str(int(timestamp)), body)).decode()

    def verify(self, body: bytes | str, headers: HeadersLike) -> dict[str, Any]:
        """Check headers, timestamp and signature; return the JSON body as a dict.

        Raises WebhookVerificationError naming the first check that failed.
        """
        found = extract_headers(headers)
        missing = [name for name in REQUIRED_HEADERS if not found.get(name)]
        if missing:
            raise WebhookVerificationError(f"Missing required header(s): {', '.join(missing)}")

        timestamp = found[TIMESTAMP_HEADER]
        self._check_timestamp(timestamp)

        if not self._signature_matches(found[ID_HEADER], timestamp, body, found[SIGNATURE_HEADER]):
            raise WebhookVerificationError(
                "No matching signature found (wrong secret or altered body?)"
            )

        # Parse only after the signature matched: never spend work on forged input.
        try:
            event = json.loads(body)
        except ValueError:  # also covers UnicodeDecodeError on non-UTF-8 bytes
            raise WebhookVerificationError("Body is not valid JSON") from None
        if not isinstance(event, dict):
            raise WebhookVerificationError("Body is JSON but not an object")
        return event

    def _signature_matches(
        self, msg_id: str, timestamp: str, body: bytes | str, header: str
    ) -> bool:
        if self._public_key is None:
            expected = self._digest(msg_id, timestamp, body)
            return any(hmac.compare_digest(expected, sig) for sig in _signatures(header, "v1"))
        signed = _signed_bytes(msg_id, timestamp, body)
        return any(
            _ed25519_verifies(self._public_key, sig, signed) for sig in _signatures(header, "v1a")
        )

    def _digest(self, msg_id: str, timestamp: str, body: bytes | str) -> bytes:
        return hmac.new(self._key, _signed_bytes(msg_id, timestamp, body), hashlib.sha256).digest()

    def _check_timestamp(self, value: str) -> None:
        if not _INTEGER.fullmatch(value):
            raise WebhookVerificationError(
                f"{TIMESTAMP_HEADER} header is not an integer Unix timestamp: {value[:32]!r}"
            )
        # Both directions matter: an old timestamp is a replay, a far-future one would
        # let a captured request be replayed for a long time.
        age = self._now() - int(value)
        if age > self.tolerance:
            raise WebhookVerificationError(
                f"Message timestamp too old: {int(age)} seconds ago (tolerance {self.tolerance}s)"
            )
        if -age > self.tolerance:
            raise WebhookVerificationError(
                f"Message timestamp too new: {int(-age)} seconds in the future "
                f"(tolerance {self.tolerance}s)"
            )


def _signed_bytes(msg_id: str, timestamp: str, body: bytes | str) -> bytes:
    raw = body.encode() if isinstance(body, str) else bytes(body)
    return f"{msg_id}.{timestamp}.".encode() + raw


def _ed25519_public_key(text: str) -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            "verifying v1a (Ed25519) signatures needs the cryptography package: "
            "pip install 'homing-receiver[ed25519]'"
        ) from None
    encoded = text.removeprefix(PUBLIC_KEY_PREFIX)
    encoded += "=" * (-len(encoded) % 4)
    try:
        raw = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise ValueError("Public key is not valid base64 (expected whpk_<base64>)") from None
    if len(raw) != ED25519_PUBLIC_KEY_BYTES:
        raise ValueError(
            f"An Ed25519 public key is {ED25519_PUBLIC_KEY_BYTES} bytes, not {len(raw)}"
        )
    return Ed25519PublicKey.from_public_bytes(raw)


def _ed25519_verifies(public_key: Any, signature: bytes, signed: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        public_key.verify(signature, signed)
    except InvalidSignature:
        return False
    return True


def _signatures(header: str, scheme: str) -> list[bytes]:
    """The decoded signatures of one scheme (`v1` HMAC or `v1a` Ed25519) in the header."""
    signatures = []
    for entry in header.split():
        version, _, encoded = entry.partition(",")
        if version != scheme:
            continue  # another scheme's entry: not this key's to check
        try:
            signatures.append(base64.b64decode(encoded, validate=True))
        except binascii.Error:
            continue  # a garbled entry must not hide a valid one after it
    return signatures
