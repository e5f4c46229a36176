from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from webhooks.models import Tenant
from webhooks.services.tenants import api_key_authenticate

KEYWORD = "Bearer"  # the WWW-Authenticate challenge of every 401
NO_CREDENTIALS = "Authentication credentials were not provided."  # DRF's own wording


class ApiKeyRefused(Exception):
    """A 401: the message says why."""


def tenant_from_authorization(header: str) -> Tenant:
    """The tenant of `Authorization: Bearer <api key>`; ApiKeyRefused otherwise."""
    if not header:
        raise ApiKeyRefused(NO_CREDENTIALS)
    scheme, _, raw_key = header.partition(" ")
    if scheme.lower() != "bearer" or not raw_key.strip():
        raise ApiKeyRefused("Use 'Authorization: Bearer <api key>'.")
    tenant = api_key_authenticate(raw_key=raw_key.strip())
    if tenant is None:
        raise ApiKeyRefused("Invalid API key.")
    return tenant


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <api key>`; `request.auth` is the key's tenant."""

    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[None, Tenant] | None:
        header = request.headers.get("Authorization", "")
        if not header:
            return None  # DRF answers 401 with NO_CREDENTIALS
        try:
            return (None, tenant_from_authorization(header))
        except ApiKeyRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the key is missing.
        return self.keyword
