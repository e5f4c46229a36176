"""One error, one answer: the DRF views and the event intake fast path (which skips DRF's
dispatch) answer the same error with the same status, body bytes and headers.

They were shaped in two places and drifted: a 429 carried `Retry-After` and `code` on the
intake path only, a 503 `Retry-After` likewise. api.errors is now the one renderer.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from api.credentials import ApiKeyRefused
from core.exceptions import (
    Busy,
    IdempotencyKeyInUse,
    IdempotencyKeyMismatch,
    InvalidInput,
    PayloadTooLarge,
    Throttled,
)
from deliveries.intake import api as intake
from deliveries.intake import backpressure
from deliveries.selectors import FeedExpired
from webhooks.api import views as webhook_views
from webhooks.api.authentication import NotForConsumers

# What a client reads of an error besides status and body. (DRF also adds `Vary: Accept`,
# which says nothing about the error.)
ERROR_HEADERS = ("Content-Type", "Retry-After", "WWW-Authenticate")


def _shape(response):
    return (
        response.status_code,
        response.content,
        {name: response.get(name) for name in ERROR_HEADERS},
    )


@pytest.fixture(autouse=True)
def _fresh_limits():
    backpressure.rate_forget()
    backpressure.backlog_forget()
    yield
    backpressure.rate_forget()
    backpressure.backlog_forget()


ERRORS = [
    Throttled("Over the event rate.", code="rate_limited", retry_after=3),
    Throttled("Backlog full.", code="backlog_full", retry_after=60),
    Busy("Too many large requests at once."),
    InvalidInput("type", "This field is required."),
    PayloadTooLarge("The request body is larger than 10 bytes."),
    IdempotencyKeyInUse("Still processing."),
    IdempotencyKeyMismatch("Different body."),
    NotForConsumers("Not for consumer keys."),
    ApiKeyRefused("Invalid API key."),
    FeedExpired(7),  # a 410 that names the oldest sequence left
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: f"{type(e).__name__}")
def test_the_same_error_is_the_same_answer_on_the_drf_and_the_intake_path(
    alice, monkeypatch, error
):
    # The DRF path never raises most of these today: a stand-in service raises each one on
    # a DRF route (POST /endpoints) and on the intake route (POST /events).
    def refuse(**kwargs):
        raise error

    monkeypatch.setattr(webhook_views, "endpoint_create", refuse)
    monkeypatch.setattr(intake, "events_ingest", refuse)

    via_drf = alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    via_intake = alice.client.post("/api/v1/events", {"type": "a", "data": {}}, format="json")

    assert _shape(via_drf) == _shape(via_intake)
    assert via_drf["Content-Type"] == "application/json"
    assert via_drf.json()["message"]


def test_a_missing_or_wrong_key_is_the_same_401_on_both_paths(db):
    from rest_framework.test import APIClient

    for authorization in (None, "Bearer nope", "Basic abc"):
        client = APIClient()
        if authorization:
            client.credentials(HTTP_AUTHORIZATION=authorization)
        via_drf = client.get("/api/v1/events")  # the DRF list view
        via_intake = client.post("/api/v1/events", {"type": "a", "data": {}}, format="json")
        assert via_drf.status_code == via_intake.status_code == 401
        assert _shape(via_drf) == _shape(via_intake), authorization
        assert via_intake["WWW-Authenticate"] == "Bearer"


def test_a_body_over_the_limit_is_the_same_413_on_both_paths(alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000  # what DRF routes read
    settings.HOMING_MAX_PAYLOAD_BYTES = 1000  # what POST /events reads
    padding = "x" * 2000
    via_drf = alice.client.post(
        "/api/v1/endpoints",
        f'{{"url": "http://127.0.0.1:9/h", "description": "{padding}"}}',
        content_type="application/json",
    )
    via_intake = alice.client.post(
        "/api/v1/events",
        f'{{"type": "a", "data": {{"p": "{padding}"}}}}',
        content_type="application/json",
    )
    assert via_drf.status_code == 413
    assert _shape(via_drf) == _shape(via_intake)


def test_invalid_input_is_the_same_400_shape_on_both_paths(alice):
    via_drf = alice.client.get("/api/v1/events?type=no%20spaces")
    via_intake = alice.client.post(
        "/api/v1/events", {"type": "a", "data": {}}, format="json", HTTP_IDEMPOTENCY_KEY="é"
    )
    for response, field in ((via_drf, "type"), (via_intake, "Idempotency-Key")):
        assert response.status_code == 400
        body = response.json()
        assert set(body) == {"message", "errors"}
        assert body["message"].startswith(f"Invalid input: {field}: ")
        assert list(body["errors"]) == [field]
    assert _shape(via_drf)[2] == _shape(via_intake)[2]


class _AdmitOneEvent(APIView):
    """A DRF view asking the intake's own backpressure service: a real 429 on the DRF path."""

    def post(self, request):
        backpressure.intake_admit(tenant=request.auth.tenant, events=1)
        return Response(status=204)


def test_backpressure_is_the_same_429_with_retry_after_on_both_paths(alice, settings):
    settings.HOMING_TENANT_EVENT_RATE = 1
    assert (
        alice.client.post("/api/v1/events", {"type": "a", "data": {}}, format="json").status_code
        == 202
    )

    via_intake = alice.client.post("/api/v1/events", {"type": "a", "data": {}}, format="json")
    request = APIRequestFactory().post("/", HTTP_AUTHORIZATION=f"Bearer {alice.key}")
    via_drf = _AdmitOneEvent.as_view()(request).render()

    assert via_intake.status_code == via_drf.status_code == 429
    assert json.loads(via_drf.content)["code"] == "rate_limited"
    assert int(via_drf["Retry-After"]) >= 1
    assert _shape(via_drf) == _shape(via_intake)


def test_no_api_module_but_api_errors_writes_an_error_body():
    """An error body written by hand in a view is how the two paths drifted: every
    `{"message": ...}` of the API comes from api.errors."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    modules = [
        *root.glob("api/*.py"),
        *(path for path in root.glob("*/api/*.py") if path.parts[len(root.parts)] != "tests"),
        root / "config" / "nul_guard.py",
    ]
    writers = sorted(
        str(path.relative_to(root))
        for path in modules
        if any(
            isinstance(node, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value == "message" for k in node.keys)
            for node in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert writers == ["api/errors.py"]
