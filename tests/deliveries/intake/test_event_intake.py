"""POST /events and /events/batch skip DRF's dispatch; what a client sees must not change."""

from __future__ import annotations

import json

import pytest
from django.test import Client

ROUTES = ["/api/v1/events", "/api/v1/events/batch"]
SINGLE = {"type": "order.paid", "data": {"n": 1}}


def _client(**headers):
    return Client(enforce_csrf_checks=True, **headers)  # an API client has no CSRF cookie


@pytest.mark.parametrize("header", [None, "Bearer hom_wrong", "Basic abc", "Bearer "])
def test_a_refused_key_is_answered_as_drf_answers_it(db, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    plain = _client().post("/api/v1/events", SINGLE, content_type="application/json", **extra)
    drf = _client().get("/api/v1/events", **extra)  # still DRF's view
    assert plain.status_code == drf.status_code == 401
    assert plain.content == drf.content
    assert plain["WWW-Authenticate"] == drf["WWW-Authenticate"] == "Bearer"
    assert plain["Content-Type"] == drf["Content-Type"] == "application/json"


def test_the_answers_keep_drfs_headers(alice):
    client = _client(HTTP_AUTHORIZATION=f"Bearer {alice.key}")
    single = client.post("/api/v1/events", SINGLE, content_type="application/json")
    batch = client.post(
        "/api/v1/events/batch", {"events": [SINGLE]}, content_type="application/json"
    )
    assert single.status_code == batch.status_code == 202
    assert single["Allow"] == client.get("/api/v1/events")["Allow"] == "GET, POST, HEAD, OPTIONS"
    assert batch["Allow"] == client.put("/api/v1/events/batch")["Allow"] == "POST, OPTIONS"
    assert single["X-Request-ID"].startswith("req_")
    assert batch.json()["events"][0]["type"] == "order.paid"


def test_a_bad_idempotency_key_names_the_header(alice):
    response = _client(HTTP_AUTHORIZATION=f"Bearer {alice.key}").post(
        "/api/v1/events", SINGLE, content_type="application/json", HTTP_IDEMPOTENCY_KEY="é"
    )
    assert response.status_code == 400
    assert response.json() == {
        "message": "Invalid input: Idempotency-Key: Must be 1 to 255 printable ASCII characters.",
        "errors": {"Idempotency-Key": ["Must be 1 to 255 printable ASCII characters."]},
    }


@pytest.mark.parametrize("path", ROUTES)
def test_other_methods_still_get_drfs_answers(alice, path):
    client = _client(HTTP_AUTHORIZATION=f"Bearer {alice.key}")
    response = client.put(path, "{}", content_type="application/json")
    assert response.status_code == 405
    assert response.json() == {"message": 'Method "PUT" not allowed.'}
    assert client.options(path).status_code == 200


def test_the_schema_still_documents_both_posts(db):
    schema = json.loads(Client().get("/api/v1/schema/", HTTP_ACCEPT="application/json").content)
    for path in ROUTES:
        operation = schema["paths"][path]["post"]
        assert "202" in operation["responses"]
        assert any(p["name"] == "Idempotency-Key" for p in operation["parameters"])
