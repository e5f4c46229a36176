"""Who is asking: a tenant, or one of its customers (the tenant narrowed to one owner).

The API puts a Scope on every authenticated request (`request.auth`), the portal builds one
from its session, and every query of theirs starts from `scope.narrow(...)`: a tenant key,
a consumer key and a portal session differ only in the scope and the routes they may use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from webhooks.models import Tenant

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Scope:
    tenant: Tenant
    owner: str | None = None  # None: the whole tenant (its own API key)
    read_only: bool = False  # a read-only portal session: nothing may change

    @property
    def tenant_id(self) -> str:
        return self.tenant.pk

    @property
    def is_consumer(self) -> bool:
        return self.owner is not None

    def narrow(self, queryset: QuerySet[M]) -> QuerySet[M]:
        """The rows of `queryset` this scope may see: its tenant's, and for a consumer only
        those of its owner's endpoints (an endpoint's own `owner`, or its `endpoint`'s).
        A model that belongs to no endpoint (events) is nothing a consumer sees."""
        queryset = queryset.filter(tenant_id=self.tenant_id)
        if self.owner is None:
            return queryset
        fields = {field.name for field in queryset.model._meta.get_fields()}
        if "owner" in fields:
            return queryset.filter(owner=self.owner)
        if "endpoint" in fields:
            return queryset.filter(endpoint__owner=self.owner)
        return queryset.none()

    def criteria(self, **criteria: Any) -> dict[str, Any]:
        """A dead-letter filter (dlq.selectors.Criteria) limited to this scope."""
        limited = {**criteria, "tenant": self.tenant_id}
        if self.owner is not None:
            limited["owner"] = self.owner
        return limited
