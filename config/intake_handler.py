"""The web process's WSGI application: event intake through a shorter middleware chain.

`POST /api/v1/events` and `POST /api/v1/events/batch` are most of what a busy web
process serves, and their view (deliveries/intake/api.py) reads no session, user,
message or CSRF token: the middleware that exist for the console's browser sessions
only cost them CPU (about a tenth of a single POST's, measured in bench/README.md). Those
two routes go through every middleware of settings.MIDDLEWARE except CONSOLE_ONLY, so
they answer the same status, headers and body, and their URLs are resolved once, when
the process starts; every other request goes through all of them. A middleware added to
settings.MIDDLEWARE later runs on both unless it is listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest
from django.urls import ResolverMatch, resolve, reverse

# Each serves browser sessions or static files only; the intake POST's answer is the
# same without them (tests/config/test_intake_handler.py compares the two chains).
CONSOLE_ONLY = frozenset(
    {
        "whitenoise.middleware.WhiteNoiseMiddleware",  # /static/ files
        "django.contrib.sessions.middleware.SessionMiddleware",  # Vary: Cookie once read
        "django.middleware.csrf.CsrfViewMiddleware",  # the intake views are csrf_exempt
        "django.contrib.auth.middleware.AuthenticationMiddleware",  # request.user
        "django.contrib.messages.middleware.MessageMiddleware",  # the console's flashes
        "console.access.security_headers",  # skips /api/ itself
    }
)
INTAKE_ROUTES = ("event-list", "event-batch")


class IntakeHandler(WSGIHandler):
    """Django's WSGI handler with settings.MIDDLEWARE minus CONSOLE_ONLY, which knows the
    intake routes' views without walking the URL patterns."""

    def __init__(self, paths: Iterable[str]) -> None:
        super().__init__()
        # Resolved once: walking the patterns was a twentieth of a single POST's CPU.
        # A ResolverMatch is only read once made, so the requests share it.
        self.matches: dict[str, ResolverMatch] = {path: resolve(path) for path in paths}

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        match = self.matches.get(request.path_info)
        if match is None or hasattr(request, "urlconf"):  # as Django would
            return super().resolve_request(request)
        request.resolver_match = match
        return match

    def load_middleware(self, is_async: bool = False) -> None:
        # Django builds the chain from settings.MIDDLEWARE alone; this swaps it for the
        # build, once, when the process starts (before any request thread runs).
        every = settings.MIDDLEWARE
        settings.MIDDLEWARE = [path for path in every if path not in CONSOLE_ONLY]
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = every


class Application:
    """Intake POSTs to `intake`, everything else to `full` (both Django handlers)."""

    def __init__(self) -> None:
        self.full = WSGIHandler()
        self.intake_paths = frozenset(reverse(name) for name in INTAKE_ROUTES)
        self.intake = IntakeHandler(self.intake_paths)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO") in (
            self.intake_paths
        ):
            return self.intake(environ, start_response)
        return self.full(environ, start_response)
