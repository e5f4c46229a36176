from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from webhooks.scope import Scope


class IsTenant(BasePermission):
    """The request carries a valid key (authentication put its Scope in `auth`). A consumer
    key may use only the views that say `consumer_allowed = True` (CONTRACT section 2):
    a route added later stays the tenant's until someone decides otherwise."""

    message = "A consumer key cannot use this route; it needs the tenant's API key."

    def has_permission(self, request: Request, view: Any) -> bool:
        scope = request.auth
        if not isinstance(scope, Scope):
            return False
        if not scope.is_consumer:
            return True
        if getattr(view, "consumer_reads_only", False):  # the catalog: consumers read it
            return request.method in SAFE_METHODS
        return getattr(view, "consumer_allowed", False)
