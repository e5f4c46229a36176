"""Signing in to the console (and Django admin) with throttled failures.

`throttled_login` counts each sign-in POST as a failure before its password is checked,
atomically with the check that its address and username may still try, and refuses it
with 429 when they may not (console/services/login_throttle): so guesses sent at the same
moment cannot get past the limit. django.contrib.auth's `user_logged_in` signal then
takes a success's count back.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.signals import user_logged_in
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render

from console.services.login_throttle import login_attempt_take, login_success_record

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
            address, username = client_address(request), _posted_username(request)
            wait = login_attempt_take(address=address, username=username)
            if wait:
                response = render(
                    request,
                    "registration/login.html",
                    {"wait_minutes": (wait + 59) // 60, "next": request.POST.get("next", "")},
                    status=429,
                )
                response["Retry-After"] = str(wait)
                return response
            request.login_counted_address = address  # type: ignore[attr-defined]  # read by _success
        return view(request, *args, **kwargs)

    return guarded


console_login = throttled_login(
    auth_views.LoginView.as_view(template_name="registration/login.html")
)


def _success(sender: object, request: Any, user: Any, **_: Any) -> None:
    # Only a sign-in that throttled_login counted gives its address's count back.
    address = getattr(request, "login_counted_address", "")
    login_success_record(address=address, username=user.get_username())


def connect_signals() -> None:
    user_logged_in.connect(_success, dispatch_uid="console-logged-in")
