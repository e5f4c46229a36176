"""Tenant scoping for API views: every query starts from the caller's tenant."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.request import Request


class TenantScoped:
    """Another tenant's id is simply not found (404), exactly as an id that does not exist;
    so is, for a consumer key, an endpoint of another owner (`request.auth` is the Scope)."""

    request: Request
    model: Any

    def get_queryset(self) -> QuerySet[Any]:
        return self.request.auth.narrow(self.model.objects.all())
