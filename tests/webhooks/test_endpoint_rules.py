"""The endpoint rules (webhooks.services.endpoint_rules) through the API."""

from __future__ import annotations

import threading

import pytest

from core import network
from webhooks.models import Endpoint

URL = "http://127.0.0.1:9/hooks"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"url": "http://example.com:70000/x"}, "url"),
        ({"url": "http://example.com:0/x"}, "url"),
        ({"url": "http://example.com:port/x"}, "url"),
        ({"url": "http://user:pw@example.com/x"}, "url"),
        ({"url": "http://user@example.com/x"}, "url"),
        ({"url": "http://example.com/x\n"}, "url"),
        ({"url": "http://example.com/a\tb"}, "url"),
        ({"url": "http://[::1/x"}, "url"),
        ({"url": "http://[fe80::1%eth0]:99999/x"}, "url"),
        ({"url": "http://example.com/" + "a" * 2030}, "url"),
        ({"url": URL, "headers": {"X-Token\n": "a"}}, "headers"),
        ({"url": URL, "headers": {"X Token": "a"}}, "headers"),
        ({"url": URL, "headers": {"X-Token": "caf\u00e9 \u2603"}}, "headers"),
        ({"url": URL, "headers": {"X-Token": "a\x00b"}}, "headers"),
        ({"url": URL, "headers": {"X-Token": "a\x7fb"}}, "headers"),
        ({"url": URL, "headers": {"Webhook-Signature": "v1,x"}}, "headers"),
        ({"url": URL, "headers": {"Content-Length": "1"}}, "headers"),
        ({"url": URL, "event_types": ["order.created\n"]}, "event_types"),
        ({"url": URL, "event_types": ["order created"]}, "event_types"),
        ({"url": URL, "rate_limit": 0}, "rate_limit"),
        ({"url": URL, "rate_limit": -5}, "rate_limit"),
        ({"url": URL, "rate_limit": 10_001}, "rate_limit"),
    ],
)
def test_it_refuses_bad_input_naming_the_field_and_writes_nothing(alice, payload, field):
    response = alice.client.post("/api/v1/endpoints", payload, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body["errors"] and field in body["message"]
    assert Endpoint.objects.count() == 0


def test_a_patch_follows_the_same_rules(alice):
    created = alice.client.post("/api/v1/endpoints", {"url": URL}, format="json").json()
    url = f"/api/v1/endpoints/{created['id']}"
    response = alice.client.patch(url, {"headers": {"X-A\n": "b"}}, format="json")
    assert response.status_code == 400 and "headers" in response.json()["errors"]
    assert Endpoint.objects.get(pk=created["id"]).headers == {}


def test_it_accepts_the_edges_of_the_rules(alice):
    response = alice.client.post(
        "/api/v1/endpoints",
        {
            "url": "https://example.com:65535/x",
            "rate_limit": 10_000,
            "headers": {"X-Token": "caf\u00e9\tok"},
            "event_types": ["order.*", "a:b/c_d-e"],
        },
        format="json",
    )
    assert response.status_code == 201, response.content


def test_a_tenant_gets_at_most_the_endpoint_limit(alice, bob, settings):
    settings.HOMING_MAX_ENDPOINTS_PER_TENANT = 3
    for _ in range(3):
        assert (
            alice.client.post("/api/v1/endpoints", {"url": URL}, format="json").status_code == 201
        )
    response = alice.client.post("/api/v1/endpoints", {"url": URL}, format="json")
    assert response.status_code == 400
    assert "HOMING_MAX_ENDPOINTS_PER_TENANT" in response.json()["message"]
    assert "3" in response.json()["message"]
    assert Endpoint.objects.filter(tenant=alice.tenant).count() == 3
    # Bob's own allowance is untouched by Alice's.
    assert bob.client.post("/api/v1/endpoints", {"url": URL}, format="json").status_code == 201


def test_a_stalled_resolver_does_not_hold_the_save(alice, settings, monkeypatch):
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = False
    release, answered = threading.Event(), threading.Event()

    def stalled(host, port=None):
        # Stalled until the test has its answer (60 s at most: a save that waits for the
        # resolver fails below, whatever the machine's load).
        release.wait(60)
        answered.set()
        return ["10.0.0.1"]

    monkeypatch.setattr(network, "resolve_addresses", stalled)
    try:
        response = alice.client.post(
            "/api/v1/endpoints", {"url": "https://slow.example.com/x"}, format="json"
        )
        assert not answered.is_set()  # the save answered while the resolver was stalled
    finally:
        release.set()
    # Accepted: the sender checks the addresses again on every connection.
    assert response.status_code == 201


def test_an_internationalised_host_is_kept_as_its_idna_2008_a_label(alice, settings, monkeypatch):
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = False
    asked: list[str] = []

    def resolve(host, port=None):
        asked.append(host)
        return ["93.184.216.34"]

    monkeypatch.setattr(network, "resolve_addresses", resolve)
    response = alice.client.post(
        "/api/v1/endpoints", {"url": "https://Straße.de:8443/zoë?q=ß"}, format="json"
    )
    assert response.status_code == 201, response.content
    # IDNA 2003 (Python's codec) would have made it strasse.de: someone else's host.
    shown = "https://xn--strae-oqa.de:8443/zoë?q=ß"
    assert response.json()["url"] == shown
    assert alice.client.get(f"/api/v1/endpoints/{response.json()['id']}").json()["url"] == shown
    assert asked == ["xn--strae-oqa.de"]  # the SSRF check looked up the name the sender will


def test_a_host_idna_2008_refuses_is_a_400_naming_the_url(alice):
    response = alice.client.post("/api/v1/endpoints", {"url": "https://☃.de/x"}, format="json")
    assert response.status_code == 400
    assert "IDNA 2008" in response.json()["errors"]["url"][0]
