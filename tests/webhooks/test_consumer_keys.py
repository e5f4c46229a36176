"""Consumer keys: Alice (a tenant) gives her customer Carol a key scoped to the endpoints
whose owner is "carol"; Carol must never reach Dave's endpoints, nor Alice's own routes."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from deliveries.models import Delivery
from tests.factories import (
    api_client_for,
    consumer_key_via_api,
    dead_letter_of,
    portal_csrf_of,
    portal_link_via_api,
    portal_session_via_link,
)
from webhooks.models import Endpoint

URL = "http://127.0.0.1:9/hooks"


def test_owner_is_kept_shown_and_filtered(alice):
    made = alice.client.post(
        "/api/v1/endpoints", {"url": URL, "owner": "carol"}, format="json"
    ).json()
    alice.client.post("/api/v1/endpoints", {"url": URL}, format="json")
    assert made["owner"] == "carol"
    listed = alice.client.get("/api/v1/endpoints?owner=carol").json()["results"]
    assert [e["id"] for e in listed] == [made["id"]]
    assert len(alice.client.get("/api/v1/endpoints").json()["results"]) == 2
    patched = alice.client.patch(f"/api/v1/endpoints/{made['id']}", {"owner": None}, format="json")
    assert patched.json()["owner"] is None


@pytest.mark.parametrize("owner", ["", "a" * 256, "tab\there", "nul\x00", 5])
def test_a_bad_owner_is_a_400_naming_it(alice, owner):
    response = alice.client.post("/api/v1/endpoints", {"url": URL, "owner": owner}, format="json")
    assert response.status_code == 400
    assert "owner" in response.json()["errors"]


@pytest.mark.parametrize("description", [0, True, ["a"]])
def test_a_description_that_is_not_a_string_is_a_400_naming_it(alice, description):
    # Schemathesis: `0` was stored as "0", though the schema says string.
    response = alice.client.post(
        "/api/v1/consumer-keys", {"owner": "carol", "description": description}, format="json"
    )
    assert response.status_code == 400 and "description" in response.json()["errors"]


def test_a_consumer_key_is_shown_once_and_listed_without_it(alice):
    response = alice.client.post(
        "/api/v1/consumer-keys", {"owner": "carol", "description": "Carol Ltd"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["key"].startswith("hoc_") and body["owner"] == "carol"
    assert set(body) >= {"id", "owner", "key", "created_at"}
    listed = alice.client.get("/api/v1/consumer-keys").json()["results"]
    assert [k["id"] for k in listed] == [body["id"]]
    assert "key" not in listed[0] and body["key"] not in str(listed)


def test_a_consumer_key_needs_an_owner(alice):
    response = alice.client.post("/api/v1/consumer-keys", {}, format="json")
    assert response.status_code == 400 and "owner" in response.json()["errors"]


def test_a_deleted_consumer_key_stops_working_at_once(alice):
    created = alice.client.post("/api/v1/consumer-keys", {"owner": "carol"}, format="json").json()
    carol = api_client_for(created["key"])
    assert carol.get("/api/v1/endpoints").status_code == 200
    assert alice.client.delete(f"/api/v1/consumer-keys/{created['id']}").status_code == 204
    assert carol.get("/api/v1/endpoints").status_code == 401
    assert alice.client.delete(f"/api/v1/consumer-keys/{created['id']}").status_code == 404
    assert alice.client.get("/api/v1/consumer-keys").json()["results"] == []


def test_another_tenant_cannot_delete_the_key(alice, bob):
    created = alice.client.post("/api/v1/consumer-keys", {"owner": "carol"}, format="json").json()
    assert bob.client.delete(f"/api/v1/consumer-keys/{created['id']}").status_code == 404
    assert api_client_for(created["key"]).get("/api/v1/endpoints").status_code == 200


def test_a_consumer_creates_endpoints_for_its_owner_only(alice):
    carol = api_client_for(consumer_key_via_api(alice, "carol"))
    response = carol.post("/api/v1/endpoints", {"url": URL, "owner": "dave"}, format="json")
    assert response.status_code == 201 and response.json()["owner"] == "carol"
    assert response.json()["secret"].startswith("whsec_")
    moved = carol.patch(
        f"/api/v1/endpoints/{response.json()['id']}", {"owner": "dave"}, format="json"
    )
    assert moved.status_code == 400 and "owner" in moved.json()["errors"]
    assert alice.client.get("/api/v1/endpoints?owner=dave").json()["results"] == []


@pytest.mark.parametrize("types", [["homing.*"], ["order.paid", "homing.endpoint.disabled"]])
def test_a_consumer_cannot_subscribe_to_operational_events(alice, types):
    """They are about every endpoint of the tenant: Dave's URLs and failures to Carol."""
    carol = api_client_for(consumer_key_via_api(alice, "carol"))
    refused = carol.post("/api/v1/endpoints", {"url": URL, "event_types": types}, format="json")
    assert refused.status_code == 400 and "event_types" in refused.json()["errors"]
    made = carol.post("/api/v1/endpoints", {"url": URL}, format="json").json()
    patched = carol.patch(f"/api/v1/endpoints/{made['id']}", {"event_types": types}, format="json")
    assert patched.status_code == 400
    tenant = alice.client.post(
        "/api/v1/endpoints", {"url": URL, "event_types": types}, format="json"
    )
    assert tenant.status_code == 201


def test_a_consumer_lists_only_its_owners_objects(alice):
    mine = alice.client.post("/api/v1/endpoints", {"url": URL, "owner": "carol"}, format="json")
    alice.client.post("/api/v1/endpoints", {"url": URL, "owner": "dave"}, format="json")
    alice.client.post("/api/v1/endpoints", {"url": URL}, format="json")
    alice.client.post("/api/v1/events", {"type": "order.paid", "data": {}}, format="json")
    carol = api_client_for(consumer_key_via_api(alice, "carol"))
    assert [e["id"] for e in carol.get("/api/v1/endpoints").json()["results"]] == [
        mine.json()["id"]
    ]
    assert carol.get("/api/v1/endpoints?owner=dave").json()["results"] == []
    deliveries = carol.get("/api/v1/deliveries").json()["results"]
    assert {d["endpoint_id"] for d in deliveries} == {mine.json()["id"]}
    assert Delivery.objects.count() == 3


# --- every route of the API, walked with a consumer key -------------------------------------

# Each API route and method: "allowed" for a consumer key (on its owner's objects; another
# owner's id is a 404), or "forbidden" (403 whatever the id). CONTRACT section 2.
POLICY = {
    ("endpoints", "GET"): "allowed",
    ("endpoints", "POST"): "allowed",
    ("endpoints/<pk>", "GET"): "allowed",
    ("endpoints/<pk>", "PATCH"): "allowed",
    ("endpoints/<pk>", "DELETE"): "allowed",
    ("endpoints/<pk>/rotate-secret", "POST"): "allowed",
    ("endpoints/<pk>/secret", "GET"): "allowed",
    ("endpoints/<pk>/test", "POST"): "allowed",
    ("endpoints/<pk>/messages", "GET"): "allowed",
    ("endpoints/<pk>/stats", "GET"): "allowed",
    ("endpoints/<pk>/recover", "POST"): "allowed",
    ("endpoints/<pk>/filter-test", "POST"): "allowed",
    ("event-types", "GET"): "allowed",  # consumers read the catalog
    ("event-types/<str:name>", "GET"): "allowed",
    ("event-types", "POST"): "forbidden",  # only the tenant's key changes it
    ("event-types/<str:name>", "PATCH"): "forbidden",
    ("event-types/<str:name>", "DELETE"): "forbidden",
    ("deliveries", "GET"): "allowed",
    ("deliveries/<pk>", "GET"): "allowed",
    ("deliveries/<pk>/retry", "POST"): "allowed",
    ("dead-letters", "GET"): "allowed",
    ("dead-letters/<pk>/replay", "POST"): "allowed",
    ("dead-letters/replay", "POST"): "allowed",
    ("dead-letters/<pk>", "DELETE"): "forbidden",  # discarding is the tenant's decision
    ("dead-letters/discard", "POST"): "forbidden",
    ("events", "GET"): "forbidden",
    ("events", "POST"): "forbidden",
    ("events/batch", "POST"): "forbidden",
    ("events/<pk>", "GET"): "forbidden",
    ("consumer-keys", "GET"): "forbidden",
    ("consumer-keys", "POST"): "forbidden",
    ("consumer-keys/<pk>", "DELETE"): "forbidden",
    ("portal-sessions", "POST"): "forbidden",
    ("schema/", "GET"): "allowed",  # the public description of the API
}


def _api_routes() -> set[tuple[str, str]]:
    """(route, method) for every view under api/v1/ in the URLconf."""
    found: set[tuple[str, str]] = set()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and prefix.startswith("api/v1/"):
                route = re.sub(r"<str:pk>", "<pk>", prefix + str(pattern.pattern))
                view = pattern.callback.cls  # type: ignore[attr-defined]  # set by DRF's as_view()
                for method in ("get", "post", "patch", "delete"):
                    if hasattr(view, method) and method in view.http_method_names:
                        found.add((route.removeprefix("api/v1/"), method.upper()))

    walk(get_resolver().url_patterns, "")
    return found


def test_the_policy_names_every_api_route():
    assert _api_routes() == set(POLICY)


@pytest.fixture
def world(alice):
    """Carol's and Dave's endpoints, each with a dead delivery; Carol's key."""
    ids = {}
    for owner in ("carol", "dave"):
        endpoint = alice.client.post(
            "/api/v1/endpoints", {"url": URL, "owner": owner}, format="json"
        ).json()
        event = alice.client.post(
            "/api/v1/events", {"type": "order.paid", "data": {}}, format="json"
        ).json()
        delivery = Delivery.objects.get(event_id=event["id"], endpoint_id=endpoint["id"])
        letter = _kill(delivery)
        ids[owner] = {
            "endpoint": endpoint["id"],
            "event": event["id"],
            "delivery": delivery.id,
            "letter": letter,
        }
    key = alice.client.post("/api/v1/consumer-keys", {"owner": "dave"}, format="json").json()
    ids["dave_key"] = key["id"]
    ids["carol"]["key"] = consumer_key_via_api(alice, "carol")
    alice.client.post("/api/v1/event-types", {"name": "order.paid"}, format="json")
    return ids


def _kill(delivery: Delivery) -> str:
    return dead_letter_of(delivery, "test: dead").id


BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("endpoints", "POST"): {"url": URL},
    ("endpoints/<pk>", "PATCH"): {"description": "changed"},
    ("endpoints/<pk>/recover", "POST"): {"since": "2020-01-01T00:00:00Z"},
    ("endpoints/<pk>/filter-test", "POST"): {"event": {"type": "order.paid", "data": {}}},
    ("dead-letters/replay", "POST"): {"endpoint": "{endpoint}"},
    ("dead-letters/discard", "POST"): {"ids": ["{letter}"]},
    ("events", "POST"): {"type": "order.paid", "data": {}},
    ("events/batch", "POST"): {"events": [{"type": "order.paid", "data": {}}]},
    ("consumer-keys", "POST"): {"owner": "carol"},
    ("portal-sessions", "POST"): {"owner": "carol"},
}


def _path(route: str, ids: dict[str, str], dave_key: str) -> str:
    if route.startswith(("endpoints/<pk>",)):
        pk = ids["endpoint"]
    elif route.startswith("deliveries/<pk>"):
        pk = ids["delivery"]
    elif route.startswith("dead-letters/<pk>"):
        pk = ids["letter"]
    elif route.startswith("events/<pk>"):
        pk = ids["event"]
    else:
        pk = dave_key
    return "/api/v1/" + route.replace("<pk>", pk).replace("<str:name>", "order.paid")


def _body(route: str, method: str, ids: dict[str, str]) -> dict:
    body: dict[str, Any] = dict(BODIES.get((route, method), {}))
    if body.get("endpoint") == "{endpoint}":
        body["endpoint"] = ids["endpoint"]
    if body.get("ids") == ["{letter}"]:
        body["ids"] = [ids["letter"]]
    return body


@pytest.mark.parametrize(("route", "method"), sorted(POLICY))
def test_a_consumer_key_on_every_route(world, route, method):
    """Allowed routes work on Carol's objects and answer 404 on Dave's (exactly as for an
    unknown id); forbidden routes answer 403 whatever the id."""
    carol = api_client_for(world["carol"]["key"])
    call = getattr(carol, method.lower())
    own = call(
        _path(route, world["carol"], world["dave_key"]),
        _body(route, method, world["carol"]),
        format="json",
    )
    if POLICY[(route, method)] == "forbidden":
        assert own.status_code == 403, (route, method, own.content)
        assert "message" in own.json()
        return
    assert own.status_code in (200, 201, 202, 204), (route, method, own.content)
    if "<pk>" not in route:
        return
    theirs = call(
        _path(route, world["dave"], world["dave_key"]),
        _body(route, method, world["dave"]),
        format="json",
    )
    assert theirs.status_code == 404, (route, method, theirs.content)


def test_a_consumer_bulk_replay_takes_only_its_owners_letters(world, alice):
    carol = api_client_for(world["carol"]["key"])
    daves = {"ids": [world["dave"]["letter"]]}
    assert carol.post("/api/v1/dead-letters/replay", daves, format="json").json() == {"replayed": 0}
    by_endpoint = {"endpoint": world["dave"]["endpoint"]}
    assert carol.post("/api/v1/dead-letters/replay", by_endpoint, format="json").json() == {
        "replayed": 0
    }
    # With no filter the selection is every letter Carol may see: hers only.
    assert carol.post("/api/v1/dead-letters/replay", {}, format="json").json() == {"replayed": 1}
    dave = alice.client.get(f"/api/v1/dead-letters?endpoint={world['dave']['endpoint']}")
    assert dave.json()["results"][0]["replayed_at"] is None


def test_a_consumer_recovers_only_its_endpoint(world):
    carol = api_client_for(world["carol"]["key"])
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    answer = carol.post(
        f"/api/v1/endpoints/{world['carol']['endpoint']}/recover", {"since": since}, format="json"
    )
    assert answer.status_code == 202 and answer.json() == {"replayed": 1}


def test_a_consumers_filters_never_reach_another_owner(world):
    carol = api_client_for(world["carol"]["key"])
    dave = world["dave"]
    assert carol.get(f"/api/v1/deliveries?endpoint={dave['endpoint']}").json()["results"] == []
    # Dave's event went to Carol's endpoint too: she sees that delivery, not Dave's.
    same_event = carol.get(f"/api/v1/deliveries?event={dave['event']}").json()["results"]
    assert [d["endpoint_id"] for d in same_event] == [world["carol"]["endpoint"]]
    assert carol.get(f"/api/v1/dead-letters?endpoint={dave['endpoint']}").json()["results"] == []


def test_a_consumer_creates_at_most_the_owner_limit(alice, settings):
    # Carol must not take every endpoint place Alice has; Dave and Alice keep theirs.
    settings.HOMING_MAX_ENDPOINTS_PER_OWNER = 3
    carol = api_client_for(consumer_key_via_api(alice, "carol"))
    for _ in range(3):
        assert carol.post("/api/v1/endpoints", {"url": URL}, format="json").status_code == 201
    refused = carol.post("/api/v1/endpoints", {"url": URL}, format="json")
    assert refused.status_code == 400
    assert "HOMING_MAX_ENDPOINTS_PER_OWNER" in refused.json()["message"]
    assert "3" in refused.json()["message"]
    assert len(carol.get("/api/v1/endpoints").json()["results"]) == 3

    dave = api_client_for(consumer_key_via_api(alice, "dave"))
    assert dave.post("/api/v1/endpoints", {"url": URL}, format="json").status_code == 201
    # The tenant's own key is bound by the tenant's limit only, for any owner.
    made = alice.client.post("/api/v1/endpoints", {"url": URL, "owner": "carol"}, format="json")
    assert made.status_code == 201


def test_a_portal_session_creates_at_most_the_owner_limit(alice, settings):
    settings.HOMING_MAX_ENDPOINTS_PER_OWNER = 1
    carol, _ = portal_session_via_link(portal_link_via_api(alice, "carol"))
    token = portal_csrf_of(carol.get("/portal/endpoints/new"))
    form = {"url": URL, "description": "", "portal_csrf": token}
    assert carol.post("/portal/endpoints/new", form).status_code == 302
    refused = carol.post("/portal/endpoints/new", form)
    assert (
        refused.status_code == 200 and "HOMING_MAX_ENDPOINTS_PER_OWNER" in refused.content.decode()
    )
    assert Endpoint.objects.filter(tenant=alice.tenant, owner="carol").count() == 1
