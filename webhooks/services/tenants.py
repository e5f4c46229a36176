from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from django.db import transaction
from django.utils import timezone

from core.exceptions import InvalidInput
from webhooks.models import ApiKey, Tenant

API_KEY_PREFIX = "hom_"
MAX_TENANT_NAME = Tenant._meta.get_field("name").max_length or 200


def _hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


@transaction.atomic
def tenant_create(*, name: str) -> tuple[Tenant, str]:
    """Create a tenant and its first API key; the key is returned once, never stored."""
    if not 1 <= len(name) <= MAX_TENANT_NAME:
        raise InvalidInput("name", f"Must be 1 to {MAX_TENANT_NAME} characters.")
    if not name.isprintable():
        raise InvalidInput("name", "Must hold printable characters only.")
    tenant = Tenant.objects.create(name=name)
    return tenant, api_key_create(tenant=tenant)


def api_key_create(*, tenant: Tenant) -> str:
    raw_key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    ApiKey.objects.create(tenant=tenant, key_hash=_hash_key(raw_key), prefix=raw_key[:12])
    return raw_key


# Recently verified keys, by hash: spares the database a query on most API requests.
# A revoked key is therefore refused within this many seconds, not at once.
KEY_CACHE_SECONDS = 5.0
KEY_CACHE_SIZE = 10_000
_recent_keys: dict[str, tuple[float, Tenant]] = {}


def api_key_authenticate(*, raw_key: str) -> Tenant | None:
    """The tenant owning `raw_key`, or None for an unknown or revoked key."""
    if not raw_key.startswith(API_KEY_PREFIX) or len(raw_key) > 200:
        return None
    key_hash = _hash_key(raw_key)
    cached = _recent_keys.get(key_hash)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    tenant = _lookup(key_hash)
    if tenant is not None:
        if len(_recent_keys) >= KEY_CACHE_SIZE:
            _recent_keys.clear()
        _recent_keys[key_hash] = (time.monotonic() + KEY_CACHE_SECONDS, tenant)
    return tenant


def api_key_revoke(*, api_key: ApiKey) -> None:
    ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=timezone.now())
    _recent_keys.pop(api_key.key_hash, None)  # this process forgets it at once


def _lookup(key_hash: str) -> Tenant | None:
    api_key = (
        ApiKey.objects.select_related("tenant")
        .filter(key_hash=key_hash, revoked_at__isnull=True)
        .first()
    )
    # The index lookup already matched; compare again in constant time so no code path
    # ever branches on a partial match of secret material.
    if api_key is None or not hmac.compare_digest(api_key.key_hash, key_hash):
        return None
    return api_key.tenant
