"""A NUL byte in a request's path or query string is refused before any view sees it.

PostgreSQL refuses NUL in text, so an id or a filter holding one reached the database
and became a 500 (API, console and admin alike). No id, filter or search can hold one:
a path with it is a 404 (nothing lives there), a query parameter with it a 400 naming
the parameter. JSON under /api/, the usual pages elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse

from api.errors import api_error_response
from core.exceptions import InvalidInput

NUL = "\x00"


class NulGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        api = request.path.startswith("/api/")
        if NUL in request.path:
            if api:
                return api_error_response(Http404())
            raise Http404("No such page.")
        if "%00" in request.META.get("QUERY_STRING", ""):
            name = _parameter_with_nul(request)
            if name is not None:
                detail = "Contains a NUL character."
                if api:
                    return api_error_response(InvalidInput(name, detail))
                raise BadRequest(f"{name}: {detail}")
        return self.get_response(request)


def _parameter_with_nul(request: HttpRequest) -> str | None:
    for name, values in request.GET.lists():
        if NUL in name or any(NUL in value for value in values):
            return name.replace(NUL, "\\x00")
    return None
