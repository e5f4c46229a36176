"""An endpoint's send settings, resolved once per claim batch, not per attempt.

What an attempt needs of its endpoint besides the URL: the custom header values and the
signing secrets in plain text, the OAuth2 client credentials, the client certificate.
A claim loads its endpoints afresh (one query per batch) and resolves these once per
endpoint (claims.py), so each attempt reads one attribute; resolved per attempt, they
were a dozen calls per delivery (decryption is cached, the lookups were not).

Fresh by the next claim at the latest: an endpoint whose secret, headers, auth or
certificate changes is sent with the new ones from the next batch that claims for it
(its row is read again then); a delivery claimed before keeps its batch's, as it keeps
the URL it was claimed with. A replaced secret still in its grace when the batch was
claimed signs that batch's attempts (seconds later at most: a lease).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from core.crypto import DecryptionFailed
from deliveries.transport.client_tls import ClientCertificate
from deliveries.transport.tokens import ClientCredentials
from deliveries.worker.certificates import endpoint_client_certificate
from webhooks.models import Endpoint
from webhooks.services.endpoint_auth import endpoint_auth_decrypted
from webhooks.services.endpoints import endpoint_headers, endpoint_signing_secrets


@dataclass(frozen=True, slots=True)
class SendSettings:
    headers: dict[str, str]  # the custom headers, decrypted
    secrets: list[str]  # every secret that signs now, decrypted
    auth: ClientCredentials | None
    certificate: ClientCertificate | None
    # OpenSSL refused the stored certificate (checked on save, so OpenSSL's rules changed
    # since): each attempt fails with this, a TLS failure the tenant sees.
    certificate_error: str | None = None


def send_settings(*, endpoint: Endpoint) -> SendSettings | None:
    """The endpoint's settings now, or None when this process cannot decrypt one of them
    (HOMING_ENCRYPTION_KEY lacks its key, or a certificate row is damaged): the claim
    gives its deliveries back. Building a client certificate takes milliseconds the first
    time (certificates.py): here, on the claim loop's thread, not on the event loop."""
    try:
        headers = endpoint_headers(endpoint=endpoint)
        secrets = endpoint_signing_secrets(endpoint=endpoint)
        auth = client_credentials(endpoint_auth_decrypted(auth=endpoint.auth))
        try:
            certificate = endpoint_client_certificate(endpoint=endpoint)
        except ssl.SSLError as exc:
            error = f"TLS error: the client certificate cannot be loaded: {exc}"
            return SendSettings(headers, secrets, auth, None, certificate_error=error)
    except (DecryptionFailed, ValueError):  # ValueError: a damaged certificate row
        return None
    return SendSettings(headers, secrets, auth, certificate)


def client_credentials(auth: dict[str, Any] | None) -> ClientCredentials | None:
    """The transport's value for an endpoint's (decrypted) `auth`; equal settings give an
    equal value, which is what the token cache is keyed by."""
    if auth is None:
        return None
    return ClientCredentials(
        token_url=auth["token_url"],
        client_id=auth["client_id"],
        client_secret=auth["client_secret"],
        scope=auth.get("scope"),
        audience=auth.get("audience"),
    )
