from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v2/events", "/api/v1/events/x/y"])
def test_an_unknown_api_route_is_a_json_404_whatever_the_method(db, method, path):
    client = Client(enforce_csrf_checks=True)  # as a browser-less API client meets it
    if method == "get":
        response = client.get(path)
    else:
        response = getattr(client, method)(path, "{}", content_type="application/json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert path in response.json()["message"]


@pytest.mark.parametrize(
    "path, extra",
    [
        ("/api/v1/endpoints", {"HTTP_ACCEPT": "text/html"}),
        ("/api/v1/endpoints?format=xml", {}),
        ("/api/v1/endpoints", {"HTTP_ACCEPT": "application/xml;q=1, */*;q=0"}),
    ],
)
def test_the_api_answers_json_whatever_accept_or_format_ask_for(alice, path, extra):
    response = alice.client.get(path, **extra)
    assert response.status_code == 200  # was 406 and 404: statuses the schema did not declare
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"results": [], "next": None}
