from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from api.credentials import KEYWORD, ApiKeyRefused
from core.exceptions import HomingError
from webhooks.models import Tenant
from webhooks.scope import Scope
from webhooks.services.consumer_keys import CONSUMER_KEY_PREFIX, consumer_key_authenticate
from webhooks.services.tenants import api_key_authenticate

NO_CREDENTIALS = "Authentication credentials were not provided."  # DRF's own wording


class NotForConsumers(HomingError):
    """A consumer key on a route only the tenant's own key may use."""

    status_code = 403


def scope_from_authorization(header: str) -> Scope:
    """The scope of `Authorization: Bearer <key>`: a tenant key's whole tenant, or a
    consumer key's tenant narrowed to its owner; ApiKeyRefused otherwise."""
    if not header:
        raise ApiKeyRefused(NO_CREDENTIALS)
    scheme, _, raw_key = header.partition(" ")
    raw_key = raw_key.strip()
    if scheme.lower() != "bearer" or not raw_key:
        raise ApiKeyRefused("Use 'Authorization: Bearer <api key>'.")
    if raw_key.startswith(CONSUMER_KEY_PREFIX):
        scope = consumer_key_authenticate(raw_key=raw_key)
        if scope is None:
            raise ApiKeyRefused("Invalid API key.")
        return scope
    tenant = api_key_authenticate(raw_key=raw_key)
    if tenant is None:
        raise ApiKeyRefused("Invalid API key.")
    return Scope(tenant=tenant)


def tenant_from_authorization(header: str) -> Tenant:
    """The tenant of a tenant key (posting events); a consumer key is a 403."""
    scope = scope_from_authorization(header)
    if scope.is_consumer:
        raise NotForConsumers("A consumer key cannot post events; use the tenant's API key.")
    return scope.tenant


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <key>`; `request.auth` is the key's Scope (webhooks.scope)."""

    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[None, Scope] | None:
        header = request.headers.get("Authorization", "")
        if not header:
            return None  # DRF answers 401 with NO_CREDENTIALS
        try:
            return (None, scope_from_authorization(header))
        except ApiKeyRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the key is missing.
        return self.keyword
