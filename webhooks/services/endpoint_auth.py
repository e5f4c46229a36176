"""An endpoint's `auth`: OAuth2 client credentials its webhooks fetch a bearer token with.

Stored as `{"type", "token_url", "client_id", "client_secret": <encrypted>, "scope",
"audience"}`; the API shows everything but the secret (write-only). A PATCH that leaves
out `client_secret` keeps the stored one, so a consumer can change the scope without
typing the secret again.
"""

from __future__ import annotations

from typing import Any

from core import crypto
from core.exceptions import InvalidInput
from webhooks.services.endpoint_rules import endpoint_url_check

OAUTH2_CLIENT_CREDENTIALS = "oauth2_client_credentials"
AUTH_TYPES = (OAUTH2_CLIENT_CREDENTIALS,)
AUTH_KEYS = frozenset({"type", "token_url", "client_id", "client_secret", "scope", "audience"})
MAX_CLIENT_ID = 255
MAX_CLIENT_SECRET = 1024
MAX_SCOPE = 1024  # scope and audience


def endpoint_auth_check(
    *, auth: Any, stored: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The `auth` to store (client secret encrypted), or None; InvalidInput naming the
    field (`auth.token_url`). `stored` is the endpoint's current value (a PATCH)."""
    if auth is None:
        return None
    if not isinstance(auth, dict):
        raise InvalidInput("auth", "An object, or null.")
    unknown = sorted(set(auth) - AUTH_KEYS)
    if unknown:
        raise InvalidInput(f"auth.{unknown[0]}", "Not a field of auth.")
    if auth.get("type") not in AUTH_TYPES:
        raise InvalidInput("auth.type", f"One of {', '.join(AUTH_TYPES)}.")
    try:
        token_url = endpoint_url_check(url=auth.get("token_url"))
    except InvalidInput as exc:
        raise InvalidInput("auth.token_url", exc.detail) from None
    client_id = _text(auth, "client_id", MAX_CLIENT_ID, required=True)
    secret = auth.get("client_secret")
    if secret is None and stored is not None and stored.get("client_secret"):
        encrypted = stored["client_secret"]  # write-only: left out means unchanged
    else:
        encrypted = crypto.encrypt(_text(auth, "client_secret", MAX_CLIENT_SECRET, required=True))
    return {
        "type": OAUTH2_CLIENT_CREDENTIALS,
        "token_url": token_url,
        "client_id": client_id,
        "client_secret": encrypted,
        "scope": _text(auth, "scope", MAX_SCOPE, required=False) or None,
        "audience": _text(auth, "audience", MAX_SCOPE, required=False) or None,
    }


def _text(auth: dict[str, Any], name: str, limit: int, *, required: bool) -> str:
    value = auth.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value or len(value) > limit:
        raise InvalidInput(f"auth.{name}", f"A string of 1 to {limit} characters.")
    if not value.isprintable():
        raise InvalidInput(f"auth.{name}", "Contains control characters.")
    return value


def auth_shown(auth: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the API and the UIs show: everything but the client secret."""
    if not auth:
        return None
    return {key: auth.get(key) for key in ("type", "token_url", "client_id", "scope", "audience")}


def endpoint_auth_decrypted(*, auth: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stored `auth` with its client secret in plain text (the worker, once per claim
    batch; decryption is cached)."""
    if not auth:
        return None
    return {**auth, "client_secret": crypto.decrypt(auth["client_secret"])}
