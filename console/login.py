"""Signing in to the console (and Django admin) with throttled failures.

Every password check passes through django.contrib.auth.authenticate, whose signals
count the failures and clear a user's count on success; `throttled_login` refuses a
sign-in POST with 429 while its address or username waits (console/services/login_throttle).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render

from console.services.login_throttle import (
    login_failure_record,
    login_success_record,
    login_wait,
)

View = Callable[..., HttpResponseBase]
USERNAME_LENGTH = 150  # Django's username field; a longer one cannot exist


def client_address(request: HttpRequest) -> str:
    """The address a request came from. Behind a trusted proxy, the one it saw: the last
    X-Forwarded-For entry (the proxy appends it; anything before came from the client)."""
    if settings.HOMING_TRUST_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").rsplit(",", 1)[-1].strip()
        if forwarded:
            return forwarded[:64]
    return request.META.get("REMOTE_ADDR", "")


def _posted_username(request: HttpRequest) -> str:
    return str(request.POST.get("username", ""))[:USERNAME_LENGTH]


def throttled_login(view: View) -> View:
    """A sign-in POST from an address or for a username that failed too often: 429."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method == "POST":
            wait = login_wait(address=client_address(request), username=_posted_username(request))
            if wait:
                response = render(
                    request,
                    "registration/login.html",
                    {"wait_minutes": (wait + 59) // 60, "next": request.POST.get("next", "")},
                    status=429,
                )
                response["Retry-After"] = str(wait)
                return response
        return view(request, *args, **kwargs)

    return guarded


console_login = throttled_login(
    auth_views.LoginView.as_view(template_name="registration/login.html")
)


def _count_failure(
    sender: object, credentials: dict[str, Any], request: Any = None, **_: Any
) -> None:
    if request is None:  # not a sign-in over HTTP (a management command, a test helper)
        return
    login_failure_record(
        address=client_address(request),
        username=str(credentials.get("username", ""))[:USERNAME_LENGTH],
    )


def _clear_user(sender: object, request: Any, user: Any, **_: Any) -> None:
    login_success_record(username=user.get_username())


def connect_signals() -> None:
    user_login_failed.connect(_count_failure, dispatch_uid="console-login-failed")
    user_logged_in.connect(_clear_user, dispatch_uid="console-logged-in")
