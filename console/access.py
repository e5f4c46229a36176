"""Who may see and do what in the console: staff only see it, a Django permission per
action (superusers have all), and the headers every console page carries."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

# Only our own files: no inline script or style, no outside asset, no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
# Django admin and the API docs page bring their own inline assets: left alone.
UNGUARDED_PREFIXES = ("/admin/", "/api/")

View = Callable[..., HttpResponse]


def staff_required(view: View) -> View:
    """Anonymous → login page; logged in but not staff → 403 page with no data."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not request.user.is_staff:
            return render(request, "403.html", status=403)
        return view(request, *args, **kwargs)

    return guarded


# The permission each console action needs (CONTRACT section 7). Templates ask the same
# question through `perms`, so a control shows exactly when its POST would be allowed.
REPLAY_OR_DISCARD = "dlq.change_deadletter"
RETRY_DELIVERY = "deliveries.change_delivery"
CHANGE_ENDPOINT = "webhooks.change_endpoint"


def permission_required(permission: str) -> Callable[[View], View]:
    """A staff user without `permission` gets a 403 page; the view (and its change) never runs.

    Apply under `staff_required`, which answers anonymous and non-staff visitors first.
    """

    def decorate(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.has_perm(permission):
                return render(request, "403.html", {"missing_permission": permission}, status=403)
            return view(request, *args, **kwargs)

        return guarded

    return decorate


def security_headers(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """Middleware: the console's Content-Security-Policy on every page outside admin/API."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if not request.path.startswith(UNGUARDED_PREFIXES):
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    return middleware
