"""Client certificates (mutual TLS): the TLS context an endpoint's connections present.

The caller (the worker) builds one `ClientCertificate` per stored certificate and keeps it
(building one reads the system's CA store: milliseconds, not per attempt), then hands it
to `Sender.post` as a plain value. Its `fingerprint` is part of the connection pool's key:
a connection whose handshake presented one certificate only ever carries requests that
present the same one, never another endpoint's (nor one without a certificate).

Pure: no Django. The PEM is loaded by core.tls (a private temporary file in memory,
removed at once: OpenSSL loads chains from files only).
"""

from __future__ import annotations

import hashlib
import ssl
from dataclasses import dataclass, field

from core.tls import load_pem_chain


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    fingerprint: str  # SHA-256 of the PEM (certificate and key): who the connection is
    context: ssl.SSLContext = field(compare=False)

    def __repr__(self) -> str:  # never the key, in a log or a traceback
        return f"ClientCertificate({self.fingerprint[:16]}…)"


def client_certificate(pem: str) -> ClientCertificate:
    """A TLS context that verifies receivers as the sender's default one does (system store
    plus SSL_CERT_FILE / SSL_CERT_DIR, host-name check) and presents `pem`: the certificate,
    its chain, then its private key. Raises ssl.SSLError if OpenSSL cannot load it."""
    context = ssl.create_default_context()
    load_pem_chain(context, pem)
    fingerprint = hashlib.sha256(pem.encode()).hexdigest()
    return ClientCertificate(fingerprint=fingerprint, context=context)
