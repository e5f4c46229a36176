from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from webhooks.models import Tenant
from webhooks.services.tenants import api_key_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <api key>`; `request.auth` is the key's tenant."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[None, Tenant] | None:
        header = request.headers.get("Authorization", "")
        if not header:
            return None
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != "bearer" or not raw_key.strip():
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api key>'.")
        tenant = api_key_authenticate(raw_key=raw_key.strip())
        if tenant is None:
            raise exceptions.AuthenticationFailed("Invalid API key.")
        return (None, tenant)

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the key is missing.
        return self.keyword
