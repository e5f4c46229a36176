"""Consumer keys (`hoc_…`): a tenant's customer gets the tenant's API narrowed to one owner."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.utils import timezone

from core.exceptions import InvalidInput
from webhooks.models import ConsumerKey, Tenant
from webhooks.scope import Scope
from webhooks.services.endpoint_rules import endpoint_owner_check

CONSUMER_KEY_PREFIX = "hoc_"


def _hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def consumer_key_create(
    *, tenant: Tenant, owner: str, description: str = ""
) -> tuple[ConsumerKey, str]:
    """A new key for `owner`; the raw key is returned once and never stored."""
    checked = endpoint_owner_check(owner=owner)
    if checked is None:
        raise InvalidInput("owner", "A consumer key needs an owner.")
    raw_key = CONSUMER_KEY_PREFIX + secrets.token_urlsafe(32)
    key = ConsumerKey.objects.create(
        tenant=tenant,
        owner=checked,
        description=description,
        key_hash=_hash_key(raw_key),
        prefix=raw_key[:12],
    )
    return key, raw_key


def consumer_key_revoke(*, consumer_key: ConsumerKey) -> None:
    # No cache in front of consumer keys: the next request with it is refused.
    ConsumerKey.objects.filter(pk=consumer_key.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


def consumer_key_authenticate(*, raw_key: str) -> Scope | None:
    """The scope of a live consumer key, or None for an unknown or revoked one."""
    if not raw_key.startswith(CONSUMER_KEY_PREFIX) or len(raw_key) > 200:
        return None
    key_hash = _hash_key(raw_key)
    found = (
        ConsumerKey.objects.select_related("tenant")
        .filter(key_hash=key_hash, revoked_at__isnull=True)
        .first()
    )
    # Compared again in constant time, as for tenant keys (webhooks.services.tenants).
    if found is None or not hmac.compare_digest(found.key_hash, key_hash):
        return None
    return Scope(tenant=found.tenant, owner=found.owner)
