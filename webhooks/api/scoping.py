"""Tenant scoping for API views: every query starts from the caller's tenant."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from rest_framework import generics
from rest_framework.request import Request

from webhooks.scope import Scope


def scope_of(request: Request) -> Scope:
    """The caller's Scope, which webhooks.api.authentication puts in `request.auth` (DRF's stubs
    type that as a token)."""
    return cast(Scope, request.auth)


class TenantScoped(generics.GenericAPIView):
    """Another tenant's id is simply not found (404), exactly as an id that does not exist;
    so is, for a consumer key, an endpoint of another owner (`request.auth` is the Scope)."""

    model: Any

    def get_queryset(self) -> QuerySet[Any]:
        return scope_of(self.request).narrow(self.model.objects.all())
