"""One place that turns every error into `{"message": ..., "errors": {...}}`."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.exceptions import HomingError, InvalidInput


def _first_message(detail: Any) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and detail:
        field, value = next(iter(detail.items()))
        return f"{field}: {_first_message(value)}"
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, InvalidInput):
        body = {"message": exc.message, "errors": {exc.field: [exc.detail]}}
        return Response(body, status=exc.status_code)
    if isinstance(exc, HomingError):
        return Response({"message": exc.message}, status=exc.status_code)
    if isinstance(exc, Http404):
        return Response({"message": "Not found."}, status=404)
    if isinstance(exc, RequestDataTooBig):  # Django's refusal was an HTML 400 page
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response({"message": f"The request body is larger than {limit} bytes."}, status=413)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug: let Django log it and answer 500
    if isinstance(exc, exceptions.ValidationError):
        response.data = {
            "message": f"Invalid input: {_first_message(exc.detail)}",
            "errors": exc.detail
            if isinstance(exc.detail, dict)
            else {"non_field_errors": exc.detail},
        }
    else:
        detail = (
            response.data.get("detail", response.data)
            if isinstance(response.data, dict)
            else response.data
        )
        response.data = {"message": str(detail)}
    return response


# Exempt from CSRF: a POST to an unknown route must be a JSON 404, not Django's 403 HTML
# page about a missing CSRF cookie. The view changes nothing, so CSRF protects nothing.
@csrf_exempt
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    return JsonResponse({"message": f"No API route {request.path}."}, status=404)
