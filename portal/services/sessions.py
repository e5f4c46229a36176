"""Portal sessions: a one-time link (its secret in the URL fragment) exchanged once for a
session cookie scoped to one tenant and one owner, until the link's `expires_at`."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from core.exceptions import HomingError, InvalidInput
from portal.models import PortalSession
from webhooks.models import Tenant
from webhooks.scope import Scope
from webhooks.services.endpoint_rules import endpoint_owner_check

DEFAULT_TTL = timedelta(hours=1)
MAX_TTL = timedelta(days=7)
# A token is 43 url-safe characters; anything much longer is not one of ours.
MAX_TOKEN_LENGTH = 100
# Sessions expired this long ago are deleted, a few each time a link is made: the table
# stays the size of the live sessions without a job of its own.
PURGE_AFTER = timedelta(days=1)
PURGE_BATCH = 100


class PortalLinkRefused(HomingError):
    """The link cannot be opened; `reason` is `used`, `expired` or `invalid`."""

    status_code = 403

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def portal_session_create(
    *, tenant: Tenant, owner: str, ttl: timedelta = DEFAULT_TTL, read_only: bool = False
) -> tuple[PortalSession, str]:
    """A new link for `owner`; returns the session and the link's secret (shown once)."""
    checked = endpoint_owner_check(owner=owner)
    if checked is None:
        raise InvalidInput("owner", "A portal session needs an owner.")
    if not timedelta(seconds=1) <= ttl <= MAX_TTL:
        raise InvalidInput("ttl", "Must be from 1s to 7d.")
    _purge_expired()
    token = secrets.token_urlsafe(32)
    session = PortalSession.objects.create(
        tenant=tenant,
        owner=checked,
        read_only=read_only,
        link_hash=_hash(token),
        expires_at=timezone.now() + ttl,
    )
    return session, token


def _purge_expired() -> None:
    # Index portalsession_expires: the oldest expired rows, a bounded batch.
    old = PortalSession.objects.filter(expires_at__lt=timezone.now() - PURGE_AFTER).order_by(
        "expires_at"
    )
    PortalSession.objects.filter(
        pk__in=list(old.values_list("pk", flat=True)[:PURGE_BATCH])
    ).delete()


def portal_session_exchange(*, link_token: str) -> tuple[PortalSession, str]:
    """Spend the link: returns its session and a new cookie value. The conditional update
    lets exactly one of any number of concurrent openings through."""
    if not link_token or len(link_token) > MAX_TOKEN_LENGTH or not link_token.isascii():
        raise PortalLinkRefused("invalid", "This portal link is not valid.")
    link_hash = _hash(link_token)
    cookie = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        spent = PortalSession.objects.filter(
            link_hash=link_hash, used_at__isnull=True, expires_at__gt=now
        ).update(used_at=now, cookie_hash=_hash(cookie))
        if spent == 1:
            return PortalSession.objects.select_related("tenant").get(link_hash=link_hash), cookie
    found = PortalSession.objects.filter(link_hash=link_hash).first()
    if found is None:
        raise PortalLinkRefused("invalid", "This portal link is not valid.")
    if found.used_at is not None:
        raise PortalLinkRefused(
            "used", "This portal link was already opened; a link works only once."
        )
    raise PortalLinkRefused("expired", "This portal link has expired.")


def portal_session_from_cookie(*, cookie: str) -> PortalSession | None:
    """The live session a cookie names, or None (unknown, tampered or expired)."""
    if not cookie or len(cookie) > MAX_TOKEN_LENGTH:
        return None
    return (
        PortalSession.objects.select_related("tenant")
        .filter(cookie_hash=_hash(cookie), expires_at__gt=timezone.now())
        .first()
    )


def portal_session_end(*, session: PortalSession) -> None:
    """Log out: the cookie stops working now."""
    PortalSession.objects.filter(pk=session.pk).update(expires_at=timezone.now())


def portal_session_scope(*, session: PortalSession) -> Scope:
    return Scope(tenant=session.tenant, owner=session.owner, read_only=session.read_only)
