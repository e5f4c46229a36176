"""Hostile query strings and path ids answer 400 or 404 naming what is wrong, never 500.

The walk at the bottom takes every route of the API from the URL configuration (the same
enumeration the OpenAPI schema is built from), so a route added later is walked too.
"""

from __future__ import annotations

import re

import pytest
from drf_spectacular.generators import EndpointEnumerator

from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.factories import dead_letter_via_api, endpoint_id_via_api
from webhooks.models import ConsumerKey, Endpoint, Event, EventType

LIST_ROUTES = ["/api/v1/events", "/api/v1/endpoints", "/api/v1/deliveries", "/api/v1/dead-letters"]


@pytest.mark.parametrize("route", LIST_ROUTES)
@pytest.mark.parametrize("limit", ["²", "٣", "0", "251", "-1", "1.5", "", "9" * 5000])
def test_a_limit_that_is_not_1_to_250_is_a_400_naming_limit(alice, route, limit):
    response = alice.client.get(route, {"limit": limit})
    assert response.status_code == 400
    assert response.json()["errors"] == {"limit": ["Must be a whole number from 1 to 250."]}


@pytest.mark.parametrize("route", LIST_ROUTES)
def test_an_empty_cursor_is_the_first_page(alice, route):
    endpoint_id_via_api(alice)
    first = alice.client.get(route).json()
    assert alice.client.get(f"{route}?cursor=").json() == first


@pytest.mark.parametrize(
    "route, parameter",
    [
        ("/api/v1/events", "type"),
        ("/api/v1/deliveries", "status"),
        ("/api/v1/deliveries", "endpoint"),
        ("/api/v1/deliveries", "event"),
        ("/api/v1/dead-letters", "endpoint"),
        ("/api/v1/dead-letters", "event_type"),
        ("/api/v1/dead-letters", "replayed"),
        ("/api/v1/events", "cursor"),
    ],
)
def test_a_nul_in_a_filter_is_a_400_naming_the_parameter(alice, route, parameter):
    response = alice.client.get(f"{route}?{parameter}=a%00b")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [parameter]


def test_filters_still_filter(alice):
    endpoint = endpoint_id_via_api(alice)
    letter = dead_letter_via_api(alice, endpoint, "order.paid")
    alice.client.post("/api/v1/events", {"type": "invoice.sent", "data": {}}, format="json")
    assert [
        e["type"] for e in alice.client.get("/api/v1/events?type=order.paid").json()["results"]
    ] == ["order.paid"]
    dead = alice.client.get("/api/v1/deliveries?status=dead").json()["results"]
    assert [d["id"] for d in dead] == [letter.delivery_id]
    assert (
        alice.client.get("/api/v1/deliveries?status=").json()
        == alice.client.get("/api/v1/deliveries").json()
    )
    waiting = alice.client.get("/api/v1/dead-letters?replayed=false").json()["results"]
    assert [d["id"] for d in waiting] == [letter.id]
    assert alice.client.get("/api/v1/dead-letters?replayed=1").json()["results"] == []


def test_a_status_filter_outside_the_statuses_is_a_400(alice):
    response = alice.client.get("/api/v1/deliveries?status=lost")
    assert response.status_code == 400
    assert "pending" in response.json()["errors"]["status"][0]


@pytest.mark.parametrize("path_id", ["%00", "ep%00x", "x" * 33])
@pytest.mark.parametrize(
    "method, route",
    [
        ("get", "/api/v1/endpoints/{}"),
        ("patch", "/api/v1/endpoints/{}"),
        ("delete", "/api/v1/endpoints/{}"),
        ("post", "/api/v1/endpoints/{}/rotate-secret"),
        ("get", "/api/v1/endpoints/{}/secret"),
        ("post", "/api/v1/endpoints/{}/test"),
        ("get", "/api/v1/events/{}"),
        ("get", "/api/v1/deliveries/{}"),
        ("post", "/api/v1/deliveries/{}/retry"),
        ("delete", "/api/v1/dead-letters/{}"),
        ("post", "/api/v1/dead-letters/{}/replay"),
    ],
)
def test_a_nul_or_overlong_path_id_is_not_found(alice, method, route, path_id):
    response = getattr(alice.client, method)(route.format(path_id), {}, format="json")
    assert response.status_code == 404
    assert response.json() == {"message": "Not found."}


def test_reactivating_shows_no_disabled_reason(alice):
    endpoint_id = endpoint_id_via_api(alice)
    Endpoint.objects.filter(pk=endpoint_id).update(is_active=False, disabled_reason="HTTP 410 Gone")
    assert alice.client.get(f"/api/v1/endpoints/{endpoint_id}").json()["disabled_reason"] == (
        "HTTP 410 Gone"
    )
    response = alice.client.patch(
        f"/api/v1/endpoints/{endpoint_id}", {"is_active": True}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["disabled_reason"] is None
    listed = alice.client.get("/api/v1/endpoints").json()["results"]
    assert listed[0]["disabled_reason"] is None


@pytest.mark.parametrize(
    "field, value",
    [
        ("is_active", "yes"),
        ("is_active", 1),
        ("rate_limit", "5"),
        ("rate_limit", 5.5),
        ("rate_limit", True),
        ("description", 5),
        ("url", 5),
    ],
)
def test_an_endpoint_field_of_the_wrong_json_type_is_a_400_naming_it(alice, field, value):
    body = {"url": "http://127.0.0.1:9/h", field: value}
    response = alice.client.post("/api/v1/endpoints", body, format="json")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [field]
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize("body", ["[1, 2]", '"x"', "{not json", '{"secret": "whsec_mine"}'])
def test_rotate_secret_reads_no_body_whatever_is_sent(alice, body):
    endpoint_id = endpoint_id_via_api(alice)
    old = alice.client.get(f"/api/v1/endpoints/{endpoint_id}/secret").json()["secret"]
    response = alice.client.post(
        f"/api/v1/endpoints/{endpoint_id}/rotate-secret", body, content_type="application/json"
    )
    assert response.status_code == 200
    assert response.json()["secret"] not in (old, "whsec_mine")


# --- the walk over every route ----------------------------------------------------------

PATH_PARAMETER = re.compile(r"\{(\w+)\}")


def api_routes() -> list[tuple[str, str, type]]:
    """(method, path, view class) of every API route in the URL configuration."""
    return [
        (method, path, callback.cls)
        for path, _, method, callback in EndpointEnumerator().get_api_endpoints()
        if path.startswith("/api/v1/") and path != "/api/v1/schema/"
    ]


def test_the_walk_finds_every_route_group():
    paths = {path for _, path, _ in api_routes()}
    for expected in [
        "/api/v1/endpoints",
        "/api/v1/events",
        "/api/v1/deliveries",
        "/api/v1/dead-letters",
    ]:
        assert expected in paths


@pytest.fixture
def one_of_each(alice):
    """Alice has an object of every kind, so that routes with a real id reach their filters."""
    dead_letter_via_api(alice, endpoint_id_via_api(alice))
    alice.client.post("/api/v1/consumer-keys", {"owner": "acme"}, format="json")
    alice.client.post("/api/v1/event-types", {"name": "order.paid"}, format="json")
    return alice


# The kind of object a path's `{id}` names, by the collection it follows.
COLLECTIONS = {
    "endpoints": Endpoint,
    "events": Event,
    "deliveries": Delivery,
    "dead-letters": DeadLetter,
    "consumer-keys": ConsumerKey,
    "event-types": EventType,
}
# Collections whose `{name}` is not the primary key.
LOOKUPS = {"event-types": "name"}


def _real_id(path: str, view_class: type, tenant) -> str:
    collection = path.removeprefix("/api/v1/").split("/")[0]
    model = COLLECTIONS.get(collection) or getattr(view_class, "model", None)
    assert model is not None, f"which objects does {path} name? add it to COLLECTIONS"
    lookup = LOOKUPS.get(collection, "pk")
    found = model._default_manager.filter(tenant=tenant).values_list(lookup, flat=True).first()
    assert found is not None, f"{tenant} has no {collection} to walk {path} with"
    return found


def test_every_route_has_an_object_to_walk_with(one_of_each):
    for model in (Endpoint, Event, Delivery, DeadLetter, ConsumerKey):
        assert model.objects.filter(tenant=one_of_each.tenant).exists(), model


def _query_parameters(schema: dict, method: str, path: str) -> list[str]:
    operation = schema["paths"][path.replace("{pk}", "{id}")][method.lower()]
    return [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]


def test_no_route_answers_500_to_a_superscript_limit_or_a_nul_anywhere(one_of_each):
    alice = one_of_each
    schema = alice.client.get("/api/v1/schema/?format=json").json()
    walked = []
    for method, path, view_class in api_routes():
        call = getattr(alice.client, method.lower())
        if PATH_PARAMETER.search(path):
            for bad_id in ["%00", "a%00b"]:
                response = call(PATH_PARAMETER.sub(bad_id, path), {}, format="json")
                assert response.status_code in (400, 404), (method, path, bad_id, response)
        walked.append((method, path))
        if method != "GET":
            continue
        real = PATH_PARAMETER.sub(_real_id(path, view_class, alice.tenant), path)
        declared = _query_parameters(schema, method, path)
        probes = dict.fromkeys(declared, "a\x00b") | {"limit": "²"}
        for name, value in probes.items():
            response = alice.client.get(real, {name: value})
            if name in declared:  # a parameter the route reads: a 400 that names it
                assert response.status_code == 400, (path, name, response.content)
                assert name in response.json()["errors"], (path, name, response.content)
            else:  # one it does not read: ignored, never a 500
                assert response.status_code < 500, (path, name, response.content)
    assert ("GET", "/api/v1/dead-letters") in walked and len(walked) >= 20
