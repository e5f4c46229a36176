from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from webhooks.models import Tenant


class IsTenant(BasePermission):
    """The request carries a valid API key (authentication put its tenant in `auth`)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, Tenant)
