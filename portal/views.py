from __future__ import annotations

from django.http import HttpRequest, HttpResponse


def open_link(request: HttpRequest) -> HttpResponse:
    return HttpResponse("portal")
