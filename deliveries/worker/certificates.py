"""Each endpoint's client certificate as the sender presents it, built once per process.

Building one (the system's CA store read, the PEM loaded) costs ~17 ms, too long for the
event loop: a claim builds it with the endpoint's other send settings (send_settings.py),
on the claim loop's thread, and keeps it here for the next claims. Keyed by the stored
(encrypted) value, which changes whenever the endpoint's certificate does (a PATCH, a
removal, a key rotation), so an endpoint's new certificate is used from its next claim
and an old one is never presented.
"""

from __future__ import annotations

import functools

from deliveries.transport.client_tls import ClientCertificate, client_certificate
from webhooks.models import Endpoint
from webhooks.services.endpoint_certificates import endpoint_certificate_decrypted

# Each context holds the CA store (~0.5 MB); more endpoints with certificates than this in
# one worker's claims rebuild theirs when they come back.
CACHE_SIZE = 256


def endpoint_client_certificate(*, endpoint: Endpoint) -> ClientCertificate | None:
    """None for an endpoint without one; raises DecryptionFailed without the key, or
    ssl.SSLError when OpenSSL cannot load it (checked on save, so a bug or a changed
    OpenSSL)."""
    stored = endpoint.tls_client_certificate
    return _built(stored) if stored else None


@functools.lru_cache(maxsize=CACHE_SIZE)
def _built(stored: str) -> ClientCertificate:
    pem = endpoint_certificate_decrypted(stored=stored)
    assert pem is not None  # stored is not empty
    return client_certificate(pem)
