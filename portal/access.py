"""Who is in the portal: the session cookie a one-time link was exchanged for, its Scope,
and the guards every portal page carries (read-only sessions, CSRF, framing, CSP).

The portal does its own CSRF check instead of Django's cookie-based one: embedded in a
tenant's page (another site), the browser withholds a SameSite=Lax CSRF cookie, so every
form would fail. Each form carries a token derived from the session cookie instead (the
synchroniser-token pattern); a forged request from another site cannot know it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any, cast

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from console.access import CONTENT_SECURITY_POLICY
from portal.models import PortalSession
from portal.services.sessions import portal_session_from_cookie, portal_session_scope
from webhooks.scope import Scope

COOKIE_NAME = "homing_portal"
COOKIE_PATH = "/portal/"
CSRF_FIELD = "portal_csrf"

View = Callable[..., HttpResponse]
NOT_FOUND = "Nothing here: no such endpoint, delivery or dead letter."


def content_security_policy() -> str:
    """The console's policy, except who may frame the portal: HOMING_PORTAL_FRAME_ANCESTORS
    (none by default, so a page elsewhere cannot frame it to trick a click)."""
    ancestors = " ".join(settings.HOMING_PORTAL_FRAME_ANCESTORS) or "'none'"
    return CONTENT_SECURITY_POLICY.replace("frame-ancestors 'none'", f"frame-ancestors {ancestors}")


def embeddable() -> bool:
    return bool(settings.HOMING_PORTAL_FRAME_ANCESTORS)


def portal_headers(response: HttpResponse) -> HttpResponse:
    response.headers["Content-Security-Policy"] = content_security_policy()
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"  # pages show an owner's data and secrets
    if embeddable():
        response.xframe_options_exempt = True  # CSP decides
    return response


def set_session_cookie(response: HttpResponse, *, cookie: str, expires_at: datetime) -> None:
    max_age = max(0, int((expires_at - timezone.now()).total_seconds()))
    if embeddable():
        # In a frame on the tenant's site the cookie is third-party: it must be
        # SameSite=None (so Secure; browsers accept that on http://localhost too), and
        # Partitioned (CHIPS), or browsers that block third-party cookies — Chromium in a
        # private window already does — drop it. Partitioned, it lives only under the
        # site that frames the portal. Python's cookie module (before 3.14) cannot write
        # that attribute, hence the header by hand; the value is URL-safe base64.
        response.headers["Set-Cookie"] = (
            f"{COOKIE_NAME}={cookie}; Max-Age={max_age}; Path={COOKIE_PATH}; HttpOnly; "
            "Secure; SameSite=None; Partitioned"
        )
        return
    response.set_cookie(
        COOKIE_NAME,
        cookie,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


def csrf_token_for(session: PortalSession) -> str:
    return hmac.new(
        settings.SECRET_KEY.encode(), f"portal-csrf:{session.cookie_hash}".encode(), hashlib.sha256
    ).hexdigest()


# Sec-Fetch-Site values of a request the portal's own page made ("none": the user's own
# navigation, never a page elsewhere).
OWN_FETCH_SITES = ("same-origin", "none")


def cross_site(request: HttpRequest) -> bool:
    """True when another site (or a sibling subdomain) made this request: by the browser's
    Sec-Fetch-Site, else by its Origin. A request with neither (a browser from before
    2020, or no browser at all) is let through, as Django's CSRF check lets a request
    without Origin through: such a browser sends no Origin on a cross-site form post
    either, so refusing it would lock out old browsers while stopping nothing new."""
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        return fetch_site not in OWN_FETCH_SITES
    origin = request.headers.get("Origin")
    if origin is None:
        return False
    own = f"{request.scheme}://{request.get_host()}"
    return origin != own and origin not in settings.CSRF_TRUSTED_ORIGINS


def refuse(request: HttpRequest, message: str, *, status: int = 403) -> HttpResponse:
    """A page saying why, with no data of any owner."""
    return portal_headers(
        render(request, "portal/refused.html", {"message": message}, status=status)
    )


class PortalRequest(HttpRequest):
    """A request in a live portal session: _guard sets both before the view runs."""

    scope: Scope
    portal_session: PortalSession


def portal_request(request: HttpRequest) -> PortalRequest:
    """The request of a view behind portal_page, with what _guard put on it."""
    return cast(PortalRequest, request)


def portal_page(view: View) -> View:
    """A page of a live portal session: `request.scope` is its Scope. Without one, a page
    that says so. POSTs change data: a read-only session gets 403, and so does a POST
    without the session's CSRF token."""
    return _guard(view, read_only_ok=False)


def portal_page_read_only_ok(view: View) -> View:
    """As portal_page, for the one POST a read-only session may make: leaving."""
    return _guard(view, read_only_ok=True)


def _guard(view: View, *, read_only_ok: bool) -> View:
    @csrf_exempt  # the session-bound token below replaces Django's cookie-based check
    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        session = portal_session_from_cookie(cookie=request.COOKIES.get(COOKIE_NAME, ""))
        if session is None:
            return refuse(
                request,
                "There is no portal session here, or it has expired. "
                "Ask for a new link to the portal.",
            )
        scope = portal_session_scope(session=session)
        portal = portal_request(request)
        portal.scope, portal.portal_session = scope, session
        if request.method not in ("GET", "HEAD"):
            if scope.read_only and not read_only_ok:
                return refuse(request, "This portal session is read only: nothing was changed.")
            sent = request.POST.get(CSRF_FIELD, "")
            if not hmac.compare_digest(sent, csrf_token_for(session)):
                return refuse(request, "This form expired or did not come from the portal.")
        try:
            return portal_headers(view(request, *args, **kwargs))
        except Http404:
            # The portal's own page (the site-wide one links to the staff console). Another
            # owner's id lands here too, exactly as an id that does not exist.
            context = {**portal_context(request), "message": NOT_FOUND}
            return portal_headers(render(request, "portal/refused.html", context, status=404))

    return guarded


def portal_context(request: HttpRequest) -> dict[str, Any]:
    """Template context processor-like helper: what every portal template needs."""
    portal = portal_request(request)
    session = portal.portal_session
    return {
        "scope": portal.scope,
        "portal_session": session,
        "portal_csrf": csrf_token_for(session),
        "can_change": not session.read_only,
    }
