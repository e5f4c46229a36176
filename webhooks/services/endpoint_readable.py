"""Which of an endpoint's encrypted fields this process cannot read.

Every secret-like field is stored encrypted (CONTRACT section 2). When
HOMING_ENCRYPTION_KEY changes without a rotation, or a row is damaged, a field no key
opens must not turn a read into a 500: the API shows it as null and names it in
`unreadable`, the pages say it cannot be read and offer to replace it, and the worker
names it in the `last_error` of the deliveries it gives back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.crypto import UNREADABLE, opened
from webhooks.models import Endpoint
from webhooks.services.endpoint_auth import endpoint_auth_decrypted
from webhooks.services.endpoint_certificates import certificate_info
from webhooks.services.endpoint_filters import endpoint_filter
from webhooks.services.endpoints import endpoint_headers, endpoint_signing_secrets

# The API's names for the fields, in the order the endpoint shows them. `secret`: the
# current one or one still signing in its rotation grace; `auth`: its client secret.
READABLE_FIELDS = ("secret", "headers", "filter", "auth", "tls_client_certificate")


def endpoint_unreadable(*, endpoint: Endpoint) -> list[str]:
    """The names (READABLE_FIELDS) of the fields no configured key opens; [] normally.
    Decryption is cached, so asking for every endpoint of a list costs microseconds."""
    reads: dict[str, Callable[[], Any]] = {
        "secret": lambda: endpoint_signing_secrets(endpoint=endpoint),
        "headers": lambda: endpoint_headers(endpoint=endpoint),
        "filter": lambda: endpoint_filter(endpoint=endpoint),
        "auth": lambda: endpoint_auth_decrypted(auth=endpoint.auth),
        "tls_client_certificate": lambda: certificate_info(stored=endpoint.tls_client_certificate),
    }
    return [name for name, read in reads.items() if opened(read) is UNREADABLE]
