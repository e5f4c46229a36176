"""The OpenAPI schema says what the API answers, errors included (CONTRACT section 2).

A client generated from `/api/v1/schema/`, or a fuzzer reading it, must meet no status it
was not told about. Every operation gets the errors that follow from its shape — 401 where
a key is needed, 404 where the path names an object, 400 (bad input; on any route a NUL
byte in the query string), 413 and 415 where it reads a body — and views add their own (409,
410, 422, 429, 503) with `errors()`.
"""

from __future__ import annotations

import inspect
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_doc
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """Every error body: a human-readable message; invalid input also names the fields."""

    message = serializers.CharField()
    # A declared field: DRF's metaclass takes it off the class, so `Serializer.errors` stays.
    errors = serializers.DictField(  # type: ignore[assignment]  # not Serializer.errors
        required=False, help_text="Invalid input: each field at fault, with what is wrong."
    )


class FeedExpiredSerializer(serializers.Serializer):
    """410: the catch-up feed no longer holds what was asked for."""

    message = serializers.CharField()
    oldest_sequence = serializers.IntegerField()


class BackpressureSerializer(serializers.Serializer):
    """429: the tenant posts faster than allowed, or has too many unfinished deliveries."""

    message = serializers.CharField()
    code = serializers.ChoiceField(choices=["rate_limited", "backlog_full"])


class UnreadableSerializer(serializers.Serializer):
    """409: a stored encrypted value no key of HOMING_ENCRYPTION_KEY opens; the message
    says how to replace it."""

    message = serializers.CharField()
    code = serializers.ChoiceField(choices=["unreadable"])
    field = serializers.CharField(help_text="What cannot be read: `signing secret`, `filter`.")


WHY = {
    400: (
        "Invalid input: `message` says what, `errors` names each field or parameter (on any "
        "route, a query parameter holding a NUL byte)."
    ),
    401: "No API key, or one that is not valid.",
    403: "A consumer key cannot do this: it needs the tenant's API key.",
    404: "No such object for this API key (another tenant's id is not found either).",
    409: "Conflict: the object's state does not allow it now (the message says why).",
    410: "Gone: older than what is retained; `oldest_sequence` is the oldest one kept.",
    413: "The request body is too large.",
    # Answered by the HTTP server before Homing sees the request, as its own HTML page.
    414: "The URL is longer than the server reads (gunicorn: 4,094 bytes of request line).",
    415: "The body is not `Content-Type: application/json`.",
    422: "This Idempotency-Key was used with a different body.",
    429: "Backpressure: wait `Retry-After` seconds, then send it again; nothing was written.",
    503: "Busy for a moment; nothing was written: send it again (after `Retry-After`, if given).",
}
BODIES: dict[int, type[serializers.Serializer]] = {
    410: FeedExpiredSerializer,
    429: BackpressureSerializer,
}

# Response headers: drf-spectacular puts these on the operations that list them.
RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    {"type": "integer", "minimum": 0},
    OpenApiParameter.HEADER,
    required=True,
    description="Seconds to wait before sending the request again.",
    response=[429],
)
RETRY_AFTER_IF_GIVEN = OpenApiParameter(
    "Retry-After",
    {"type": "integer", "minimum": 0},
    OpenApiParameter.HEADER,
    description="Seconds to wait before sending the request again, when known.",
    response=[503],
)


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Extra error statuses of one operation, for `extend_schema(responses=...)`."""
    return {
        code: OpenApiResponse(BODIES.get(code, ErrorSerializer), description=WHY[code])
        for code in codes
    }


def unreadable_error() -> dict[int, OpenApiResponse]:
    """The 409 of an operation that reads a stored secret or filter on purpose."""
    why = (
        "A value it needs is stored encrypted and no key of HOMING_ENCRYPTION_KEY opens it "
        "(the key changed without a rotation): `field` names it, `message` says how to "
        "replace it."
    )
    return {409: OpenApiResponse(UnreadableSerializer, description=why)}


# The description of a POST that takes no body.
NO_BODY = "Reads no request body (one sent is ignored)."


class ApiSchema(AutoSchema):
    """AutoSchema plus the errors every operation of its shape answers."""

    def get_description(self) -> str:  # type: ignore[override]  # drf-spectacular's, not DRF's
        # What the view itself says: a mixin's docstring is not the operation's.
        own = vars(type(self.view)).get("__doc__")
        method = getattr(self.view, self.method.lower(), None)
        return get_doc(method) or (inspect.cleandoc(own) if own else "")

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        responses = operation["responses"]
        for code in self._implied_errors(operation):
            if str(code) not in responses:
                body = None if code == 414 else ErrorSerializer
                responses[str(code)] = self._get_response_for_code(
                    OpenApiResponse(body, description=WHY[code]), str(code)
                )
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _implied_errors(self, operation: dict[str, Any]) -> list[int]:
        locations = {parameter["in"] for parameter in operation.get("parameters", [])}
        # 400 everywhere: besides bad input, any route refuses a query parameter holding
        # a NUL byte (config.nul_guard), read or not.
        implied = [400, 414]
        if operation.get("security"):
            implied.append(401)
        if "path" in locations:
            implied.append(404)
        # DRF's JSON parser refuses another Content-Type; the event intake reads any body
        # as JSON (deliveries.intake.api), and its views say so.
        if operation.get("requestBody"):
            implied.append(413)  # over DATA_UPLOAD_MAX_MEMORY_SIZE (intake: its own limits)
            if not getattr(self.view, "reads_any_content_type", False):
                implied.append(415)
        return sorted(implied)


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "webhooks.api.authentication.ApiKeyAuthentication"  # a path: no import
    name = "apiKey"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "`Authorization: Bearer <api key>` (from `manage.py create_tenant`).",
        }


def link_lists_to_items(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """OpenAPI links from each list to the operations on its items (`/dead-letters` ->
    `/dead-letters/{id}/replay`): a client, or a fuzzer's stateful phase, can follow an id
    it was shown to what can be done with it. Runs on the finished schema."""
    paths = result["paths"]
    for path, methods in paths.items():
        listed = methods.get("get", {}).get("responses", {}).get("200")
        if listed is None or "next" not in _properties(result, listed):
            continue
        links = {
            operation["operationId"]: {
                "operationId": operation["operationId"],
                "parameters": {"id": "$response.body#/results/0/id"},
            }
            for item_path, item_methods in paths.items()
            if item_path.startswith(f"{path}/{{id}}")
            for operation in item_methods.values()
        }
        if links:
            listed["links"] = links
    return result


def _properties(result: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    if "$ref" in schema:
        schema = result["components"]["schemas"][schema["$ref"].split("/")[-1]]
    return schema.get("properties", {})
