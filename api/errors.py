"""The one place that shapes an API error: status, `{"message", ...}` body and headers.

Every API path answers an error through `api_error`: DRF views through
`exception_handler` (REST_FRAMEWORK's EXCEPTION_HANDLER), the event intake fast path
(webhooks.api.intake) and the middleware before any view (config.nul_guard) through
`api_error_response`. A 429 that carried `Retry-After` on one path only was the drift
this module exists to prevent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import set_rollback

from api.credentials import KEYWORD, ApiKeyRefused
from core.exceptions import HomingError, Throttled


@dataclass(frozen=True)
class ApiError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    # Not a warning line per refused request (django.request logs every 4xx): a throttled
    # flood would become a flood of logs. The access log still has them.
    quiet: bool = False


def api_error(exc: Exception) -> ApiError | None:
    """What the API answers to `exc`; None for a bug (Django logs it and answers 500)."""
    if isinstance(exc, ApiKeyRefused):
        return ApiError(401, {"message": str(exc)}, {"WWW-Authenticate": KEYWORD})
    if isinstance(exc, HomingError):
        headers = {} if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}
        body = {"message": exc.message, **exc.details()}
        return ApiError(exc.status_code, body, headers, quiet=isinstance(exc, Throttled))
    if isinstance(exc, Http404):
        return ApiError(404, {"message": "Not found."})
    if isinstance(exc, RequestDataTooBig):  # Django's refusal was an HTML 400 page
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return ApiError(413, {"message": f"The request body is larger than {limit} bytes."})
    if isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    if isinstance(exc, exceptions.APIException):
        return _drf_error(exc)
    return None


def _drf_error(exc: exceptions.APIException) -> ApiError:
    headers = {}
    auth_header = getattr(exc, "auth_header", None)  # set by the view: the 401 challenge
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if wait:
        headers["Retry-After"] = str(int(wait))
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        body = {
            "message": f"Invalid input: {_first_message(detail)}",
            "errors": detail if isinstance(detail, dict) else {"non_field_errors": detail},
        }
        return ApiError(exc.status_code, body, headers)
    said = exc.detail.get("detail", exc.detail) if isinstance(exc.detail, dict) else exc.detail
    return ApiError(exc.status_code, {"message": str(said)}, headers)


def _first_message(detail: Any) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and detail:
        name, value = next(iter(detail.items()))
        return f"{name}: {_first_message(value)}"
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """REST_FRAMEWORK's EXCEPTION_HANDLER: every DRF view's errors."""
    error = api_error(exc)
    if error is None:
        return None  # a bug: let Django log it and answer 500
    set_rollback()  # as DRF's own handler does: an error undoes the view's atomic block
    response = Response(error.body, status=error.status, headers=error.headers)
    if error.quiet:
        response._has_been_logged = True  # type: ignore[attr-defined]  # read by django.request
    return response


_renderer = JSONRenderer()


def render_json(body: Any) -> bytes:
    """JSON as the DRF views render it (compact, UTF-8, U+2028/9 escaped)."""
    return _renderer.render(body)


def api_error_response(error: ApiError | Exception) -> HttpResponse:
    """The answer of a path without DRF's dispatch, byte for byte what a DRF view answers."""
    if not isinstance(error, ApiError):
        shaped = api_error(error)
        if shaped is None:
            raise error
        error = shaped
    response = HttpResponse(
        render_json(error.body), status=error.status, content_type="application/json"
    )
    for name, value in error.headers.items():
        response[name] = value
    if error.quiet:
        response._has_been_logged = True  # type: ignore[attr-defined]  # read by django.request
    return response


# Exempt from CSRF: a POST to an unknown route must be a JSON 404, not Django's 403 HTML
# page about a missing CSRF cookie. The view changes nothing, so CSRF protects nothing.
@csrf_exempt
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    return api_error_response(ApiError(404, {"message": f"No API route {request.path}."}))
