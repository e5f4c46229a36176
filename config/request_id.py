"""X-Request-ID: every response carries one, and the request's log lines carry it too.

A caller's own id (at most 200 printable ASCII characters) is echoed, so a request can be
followed from the caller's logs into ours; anything else is replaced by a fresh id.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from config.logs import request_id

HEADER = "X-Request-ID"
META_KEY = "HTTP_X_REQUEST_ID"  # HEADER as WSGI names it
ACCEPTED = re.compile(r"[\x20-\x7e]{1,200}")


def _request_id_from(request: HttpRequest) -> str:
    # From META: request.headers would build a dict of every header for this one.
    offered = request.META.get(META_KEY, "")
    if ACCEPTED.fullmatch(offered) and offered.strip():
        return offered
    return f"req_{uuid.uuid4().hex}"


class RequestIdMiddleware:
    """First in MIDDLEWARE, so that even an answer from another middleware carries it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = _request_id_from(request)
        # django.request logs after this returns: config.logs.RequestIdFilter reads it here.
        request.request_id = rid  # type: ignore[attr-defined]  # our own attribute
        token = request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            # Threads serve one request after another: no id may leak into the next.
            request_id.reset(token)
        response[HEADER] = rid
        return response
