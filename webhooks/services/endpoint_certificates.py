"""An endpoint's `tls_client_certificate`: the chain and key its webhooks present (mTLS).

Write-only: stored encrypted like the signing secret, never shown back. What the API and
the UIs show instead is its summary (`tls_client_certificate_info`: the leaf's subject,
issuer and expiry), read from the stored value. Checked on save, so the worker never meets
one that cannot load: it parses, its key is the leaf certificate's, no certificate in the
chain has expired (a receiver would refuse the handshake for each), and OpenSSL loads it
as the sender will.
"""

from __future__ import annotations

import functools
import re
import ssl
from datetime import UTC, datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from core import crypto
from core.exceptions import InvalidInput
from core.tls import load_pem_chain

FIELD = "tls_client_certificate"
MAX_PEM_CHARS = 64 * 1024  # a chain of a few RSA-4096 certificates and a key is ~12 KiB
_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?\r?\n-----END \1-----", re.DOTALL)


def endpoint_certificate_check(*, pem: Any) -> str:
    """The value to store: the certificate chain then the key, encrypted; "" for none
    (null or ""). InvalidInput naming the field, with the reason, otherwise."""
    if pem is None or pem == "":
        return ""
    if not isinstance(pem, str):
        raise InvalidInput(FIELD, "A PEM string (certificate chain and private key), or null.")
    if len(pem) > MAX_PEM_CHARS:
        raise InvalidInput(FIELD, f"At most {MAX_PEM_CHARS} characters.")
    blocks = [(m.group(1), m.group(0)) for m in _BLOCK.finditer(pem)]
    certificate_blocks = [text for label, text in blocks if label == "CERTIFICATE"]
    key_blocks = [(label, text) for label, text in blocks if label.endswith("PRIVATE KEY")]
    if not certificate_blocks:
        raise InvalidInput(FIELD, "No PEM certificate (-----BEGIN CERTIFICATE-----).")
    if len(key_blocks) != 1:
        raise InvalidInput(FIELD, "Needs exactly one PEM private key after the certificates.")
    label, key_text = key_blocks[0]
    if label == "ENCRYPTED PRIVATE KEY" or "Proc-Type: 4,ENCRYPTED" in key_text:
        raise InvalidInput(FIELD, "The private key is encrypted; give it without a passphrase.")
    try:
        certificates = [
            x509.load_pem_x509_certificate(text.encode()) for text in certificate_blocks
        ]
    except ValueError as exc:
        raise InvalidInput(FIELD, f"A certificate does not parse: {exc}") from None
    try:
        key = serialization.load_pem_private_key(key_text.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(FIELD, f"The private key does not parse: {exc}") from None
    except Exception as exc:  # cryptography's UnsupportedAlgorithm: a key type it cannot use
        raise InvalidInput(FIELD, f"The private key is not supported: {exc}") from None
    if _public_bytes(key.public_key()) != _public_bytes(certificates[0].public_key()):
        raise InvalidInput(
            FIELD, "The private key does not match the first certificate (the client's own)."
        )
    now = datetime.now(UTC)
    for certificate in certificates:
        if certificate.not_valid_after_utc <= now:
            expired = certificate.not_valid_after_utc.isoformat().replace("+00:00", "Z")
            raise InvalidInput(
                FIELD, f"The certificate {certificate.subject.rfc4514_string()} expired {expired}."
            )
    # Stored as OpenSSL loads it: the client's certificate first, the chain, then the key.
    normalised = "\n".join([*certificate_blocks, key_text]) + "\n"
    try:  # as the sender will: OpenSSL's own rules (key sizes, algorithms) apply
        load_pem_chain(ssl.create_default_context(), normalised)
    except ssl.SSLError as exc:
        raise InvalidInput(FIELD, f"OpenSSL refuses it: {exc.reason or exc}") from None
    return crypto.encrypt(normalised)


def _public_bytes(public_key: Any) -> bytes:
    return bytes(
        public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def certificate_info(*, stored: str) -> dict[str, str] | None:
    """What the API and the UIs show of a stored certificate: subject, issuer and expiry
    of the client's own certificate; None when there is none. DecryptionFailed or
    ValueError when it cannot be read (readers go through crypto.opened)."""
    if not stored:
        return None
    return dict(_info(tuple(crypto.configured_keys()), stored))


# A stored value never changes its plaintext; keyed on the keys too, so that what one key
# set opened is not shown once the keys no longer open it.
@functools.lru_cache(maxsize=1024)
def _info(keys: tuple[bytes, ...], stored: str) -> dict[str, str]:
    pem = crypto.decrypt(stored)
    block = _BLOCK.search(pem)
    if block is None:  # checked on save: a damaged row (crypto.opened reads ValueError so)
        raise ValueError("the stored client certificate holds no PEM certificate")
    certificate = x509.load_pem_x509_certificate(block.group(0).encode())
    return {
        "subject": certificate.subject.rfc4514_string(),
        "issuer": certificate.issuer.rfc4514_string(),
        "expires_at": certificate.not_valid_after_utc.isoformat().replace("+00:00", "Z"),
    }


def endpoint_certificate_decrypted(*, stored: str) -> str | None:
    """The PEM in plain text (the worker; decryption is cached), or None."""
    return crypto.decrypt(stored) if stored else None
