"""The OpenAPI schema states what the API answers: errors, limits, and no body where none
is read. Routes are taken from the schema itself, so a route added later is held to the
same rules (the Schemathesis run in tests/e2e/test_api_schema_fuzz.py checks the answers)."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client


@pytest.fixture
def schema(db) -> dict:
    response = Client().get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def operations(schema: dict):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), path, operation


def test_every_operation_needs_the_api_key_and_documents_401(schema):
    assert schema["components"]["securitySchemes"]["apiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "`Authorization: Bearer <api key>` (from `manage.py create_tenant`).",
    }
    for method, path, operation in operations(schema):
        assert operation["security"] == [{"apiKey": []}], (method, path)
        assert "401" in operation["responses"], (method, path)


def test_every_error_has_the_error_body(schema):
    error = {"$ref": "#/components/schemas/Error"}
    unreadable = {"$ref": "#/components/schemas/Unreadable"}
    assert schema["components"]["schemas"]["Error"]["required"] == ["message"]
    assert set(schema["components"]["schemas"]["Error"]["properties"]) == {"message", "errors"}
    for method, path, operation in operations(schema):
        for code, response in operation["responses"].items():
            if code == "414":  # the HTTP server's own page, before Homing: no body stated
                assert "content" not in response, (path, code)
            elif code not in ("410", "429") and code[0] in "45":
                stated = response["content"]["application/json"]["schema"]
                # A 409 about a stored value no key opens: the error body, naming the field.
                assert stated == error or (code, stated) == ("409", unreadable), (path, code)
    assert "message" in schema["components"]["schemas"]["Unreadable"]["required"]


def test_every_operation_documents_400_and_one_on_an_id_404(schema):
    for method, path, operation in operations(schema):
        where = {p["in"] for p in operation.get("parameters", [])}
        assert ("404" in operation["responses"]) == ("path" in where), (method, path)
        assert "400" in operation["responses"], (method, path)  # a NUL in any query: 400
        parsed_by_drf = "requestBody" in operation and not path.startswith("/api/v1/events")
        assert ("415" in operation["responses"]) == parsed_by_drf, (method, path)
        assert ("413" in operation["responses"]) == ("requestBody" in operation), (method, path)


def test_a_form_body_where_json_is_read_is_the_documented_415(alice, schema):
    response = alice.client.post(
        "/api/v1/endpoints",
        "url=http://127.0.0.1:9/",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 415
    assert "415" in schema["paths"]["/api/v1/endpoints"]["post"]["responses"]


@pytest.mark.parametrize("path", ["/api/v1/events", "/api/v1/events/batch"])
def test_posting_events_documents_backpressure_idempotency_and_size(schema, path):
    responses = schema["paths"][path]["post"]["responses"]
    assert {"202", "400", "401", "409", "413", "422", "429", "503"} <= set(responses)
    backpressure = responses["429"]
    assert backpressure["headers"]["Retry-After"]["required"] is True
    body = schema["components"]["schemas"]["Backpressure"]
    assert sorted(body["required"]) == ["code", "message"]
    code = schema["components"]["schemas"][body["properties"]["code"]["$ref"].split("/")[-1]]
    assert set(code["enum"]) == {"rate_limited", "backlog_full"}


def test_a_batch_holds_1_to_max_batch_events(schema):
    events = schema["components"]["schemas"]["EventBatchCreate"]["properties"]["events"]
    assert events["minItems"] == 1
    assert events["maxItems"] == settings.HOMING_MAX_BATCH_EVENTS


@pytest.mark.parametrize(
    "method, path",
    [
        ("post", "/api/v1/endpoints/{id}/rotate-secret"),
        ("post", "/api/v1/endpoints/{id}/test"),
        ("post", "/api/v1/deliveries/{id}/retry"),
        ("post", "/api/v1/dead-letters/{id}/replay"),
    ],
)
def test_routes_that_read_no_body_declare_none(schema, method, path):
    assert "requestBody" not in schema["paths"][path][method]


def test_list_routes_state_their_limit_cursor_and_filters(schema):
    lists = {
        "/api/v1/endpoints": {"owner"},
        "/api/v1/events": {"type"},
        "/api/v1/deliveries": {"status", "endpoint", "event"},
        "/api/v1/dead-letters": {"endpoint", "event_type", "replayed"},
    }
    for path, filters in lists.items():
        parameters = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
        assert set(parameters) == {"limit", "cursor", *filters}, path
        assert parameters["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 250}
        assert parameters["cursor"]["schema"]["pattern"] == "^[A-Za-z0-9_-]{1,200}$"
        for name in ["cursor", *filters]:
            assert parameters[name]["allowEmptyValue"] is True  # empty: as if absent
    statuses = schema["paths"]["/api/v1/deliveries"]["get"]["parameters"]
    status = next(p for p in statuses if p["name"] == "status")
    assert status["schema"]["enum"] == ["pending", "delivering", "succeeded", "dead"]


def test_endpoint_fields_state_the_limits_the_rules_enforce(schema):
    fields = schema["components"]["schemas"]["Endpoint"]["properties"]
    assert fields["url"]["maxLength"] == 2048
    assert fields["description"]["maxLength"] == 500
    assert fields["event_types"]["maxItems"] == 100
    assert (fields["rate_limit"]["minimum"], fields["rate_limit"]["maximum"]) == (1, 10_000)
    assert fields["headers"]["maxProperties"] == 20
    assert fields["disabled_reason"]["nullable"] is True


# Schemathesis sent these, schema-valid then, and the API refused them for reasons a
# schema can state: an empty owner or dead-letter filter, whitespace in a URL.
REFUSED = [
    ("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h", "owner": ""}),
    ("/api/v1/consumer-keys", {"owner": ""}),
    ("/api/v1/portal-sessions", {"owner": ""}),
    ("/api/v1/dead-letters/replay", {"endpoint": ""}),
    ("/api/v1/dead-letters/replay", {"event_type": ""}),
    ("/api/v1/dead-letters/discard", {"ids": [""]}),
    ("/api/v1/endpoints", {"url": "http://127.0.0.1:9/a b"}),
    ("/api/v1/endpoints", {"url": "http://127.0.0.1:9/a\u3000b"}),
    ("/api/v1/endpoints", {"url": "http://127.0.0.1:9/a\x85b"}),
    ("/api/v1/endpoints", {"url": "http://127.0.0.1:9/\t"}),
    ("/api/v1/endpoints", {"owner": "tab\there", "url": "http://127.0.0.1:9/h"}),
]


def _request_schema(schema: dict, path: str) -> dict:
    body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    name = body["schema"]["$ref"].split("/")[-1]
    return schema["components"]["schemas"][name]


def ecma_search(pattern: str, value: str) -> re.Match | None:
    # JSON Schema patterns are ECMA-262, whose `$` does not match before a final newline
    # as Python's does.
    return re.search(re.sub(r"\$$", r"\\Z", pattern), value)


def _schema_allows(field_schema: dict, value) -> bool:
    if isinstance(value, list):
        return all(_schema_allows(field_schema["items"], item) for item in value)
    return len(value) >= field_schema.get("minLength", 0) and (
        "pattern" not in field_schema or ecma_search(field_schema["pattern"], value) is not None
    )


@pytest.mark.parametrize(("path", "body"), REFUSED)
def test_what_the_api_refuses_for_a_stated_reason_the_schema_refuses_too(alice, schema, path, body):
    properties = _request_schema(schema, path)["properties"]
    assert not all(_schema_allows(properties[name], value) for name, value in body.items())
    assert alice.client.post(path, body, format="json").status_code == 400


def test_the_url_pattern_refuses_each_space_the_api_refuses(schema):
    pattern = schema["components"]["schemas"]["Endpoint"]["properties"]["url"]["pattern"]
    for code in range(0x110000):
        char = chr(code)
        refused = char.isspace() or code < 0x20 or code == 0x7F
        assert (ecma_search(pattern, f"https://a.example/{char}") is None) == refused, hex(code)


def test_a_body_over_the_upload_limit_is_the_documented_json_413(alice, schema, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = '{"url": "http://127.0.0.1:9/h", "description": "%s"}' % ("x" * 20_000)
    response = alice.client.post("/api/v1/endpoints", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {"message": "The request body is larger than 10000 bytes."}
    assert "413" in schema["paths"]["/api/v1/endpoints"]["post"]["responses"]


def test_a_nul_in_a_query_parameter_no_route_reads_is_the_documented_400(alice, schema):
    endpoint = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json"
    )
    response = alice.client.get(f"/api/v1/endpoints/{endpoint.json()['id']}?unread=%00")
    assert response.status_code == 400
    assert response.json()["errors"] == {"unread": ["Contains a NUL character."]}
    assert "400" in schema["paths"]["/api/v1/endpoints/{id}"]["get"]["responses"]
