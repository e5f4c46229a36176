"""The event-type catalog (POST/GET/PATCH/DELETE /event-types) and HOMING_VALIDATE_EVENTS:
alice's catalog, carol (her customer's consumer key) reading it, bob (another tenant) not."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from core import counters
from tests.factories import consumer_key_via_api
from webhooks.models import Event

PAID = {
    "name": "invoice.paid",
    "description": "An invoice was paid in full.",
    "schema": {
        "type": "object",
        "required": ["amount", "lines"],
        "properties": {
            "amount": {"type": "integer", "minimum": 0},
            "lines": {
                "type": "array",
                "items": {"type": "object", "required": ["sku"]},
            },
        },
    },
    "examples": [{"amount": 1200, "lines": [{"sku": "A-1"}]}],
}


def _catalog(actor, entry=PAID):
    response = actor.client.post("/api/v1/event-types", entry, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _consumer(actor, owner="carol"):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {consumer_key_via_api(actor, owner)}")
    return client


def test_an_entry_is_created_read_listed_changed_and_deleted(alice):
    made = _catalog(alice)
    assert {k: made[k] for k in PAID} == PAID and made["deprecated"] is False
    assert alice.client.get("/api/v1/event-types/invoice.paid").json() == made
    listed = alice.client.get("/api/v1/event-types").json()
    assert [e["name"] for e in listed["results"]] == ["invoice.paid"]
    changed = alice.client.patch(
        "/api/v1/event-types/invoice.paid", {"deprecated": True}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["deprecated"] is True
    assert alice.client.delete("/api/v1/event-types/invoice.paid").status_code == 204
    assert alice.client.get("/api/v1/event-types/invoice.paid").status_code == 404


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"name": "invoice paid"}, "name"),
        ({"name": "homing.test"}, "name"),
        ({"name": "a", "schema": {"type": "integr"}}, "schema.type"),
        (
            {"name": "a", "schema": {"properties": {"x": {"minimum": "1"}}}},
            "schema.properties.x.minimum",
        ),
        ({"name": "a", "schema": {"$ref": "https://example.com/s.json"}}, "schema.$ref"),
        (
            {"name": "a", "schema": {"$schema": "http://json-schema.org/draft-07/schema#"}},
            "schema.$schema",
        ),
        ({"name": "a", "schema": 5}, "schema"),
        ({"name": "a", "examples": [[1]]}, "examples[0]"),
        ({**PAID, "examples": [{"amount": -1, "lines": []}]}, "examples[0].amount"),
        # Found by Schemathesis: what jsonb cannot store was a 500.
        ({"name": "a", "examples": [{"x": "\ud800"}]}, "examples[0]"),
        ({"name": "a", "examples": [{"x\u0000": 1}]}, "examples[0]"),
        ({"name": "a", "schema": {"description": "\udfff"}}, "schema"),
        ({"name": "a", "description": "\ud800"}, "description"),
    ],
)
def test_an_invalid_entry_is_a_400_naming_the_path(alice, entry, field):
    # As JSON text with \u escapes: a lone surrogate cannot be encoded otherwise.
    body = json.dumps(entry)
    response = alice.client.post("/api/v1/event-types", body, content_type="application/json")
    assert response.status_code == 400 and field in response.json()["errors"], response.content


def test_a_name_is_unique_per_tenant_not_across_tenants(alice, bob):
    _catalog(alice)
    again = alice.client.post("/api/v1/event-types", PAID, format="json")
    assert again.status_code == 400 and "name" in again.json()["errors"]
    _catalog(bob)


def test_a_new_schema_must_still_accept_the_examples(alice):
    _catalog(alice)
    response = alice.client.patch(
        "/api/v1/event-types/invoice.paid",
        {"schema": {"type": "object", "required": ["currency"]}},
        format="json",
    )
    assert response.status_code == 400 and "examples[0]" in response.json()["errors"]


def test_carol_reads_alices_catalog_and_cannot_change_it(alice):
    _catalog(alice)
    carol = _consumer(alice)
    assert [e["name"] for e in carol.get("/api/v1/event-types").json()["results"]] == [
        "invoice.paid"
    ]
    assert carol.get("/api/v1/event-types/invoice.paid").status_code == 200
    assert carol.post("/api/v1/event-types", {"name": "x"}, format="json").status_code == 403
    assert (
        carol.patch("/api/v1/event-types/invoice.paid", {"deprecated": True}, format="json")
    ).status_code == 403
    assert carol.delete("/api/v1/event-types/invoice.paid").status_code == 403


def test_bob_sees_nothing_of_alices_catalog(alice, bob):
    _catalog(alice)
    assert bob.client.get("/api/v1/event-types").json()["results"] == []
    assert bob.client.get("/api/v1/event-types/invoice.paid").status_code == 404
    assert bob.client.delete("/api/v1/event-types/invoice.paid").status_code == 404


def _post(actor, data, event_type="invoice.paid"):
    return actor.client.post("/api/v1/events", {"type": event_type, "data": data}, format="json")


def test_validation_is_off_by_default(alice):
    _catalog(alice)
    assert _post(alice, {"amount": "lots"}).status_code == 202


def test_enforce_refuses_an_event_naming_the_path(alice, settings):
    settings.HOMING_VALIDATE_EVENTS = "enforce"
    _catalog(alice)
    refused = _post(alice, {"amount": 5, "lines": [{"sku": "A"}, {"qty": 1}]})
    assert refused.status_code == 400
    assert refused.json()["errors"] == {"data.lines[1]": ['"sku" is a required property']}
    assert _post(alice, {"amount": 5, "lines": []}).status_code == 202
    assert _post(alice, {"anything": True}, "invoice.sent").status_code == 202  # no schema
    assert Event.objects.filter(tenant=alice.tenant).count() == 2


def test_enforce_refuses_a_whole_batch_naming_the_item(alice, settings):
    settings.HOMING_VALIDATE_EVENTS = "enforce"
    _catalog(alice)
    batch = {
        "events": [
            {"type": "invoice.paid", "data": {"amount": 1, "lines": []}},
            {"type": "invoice.sent", "data": {}},
            {"type": "invoice.paid", "data": {"amount": -3, "lines": []}},
        ]
    }
    refused = alice.client.post("/api/v1/events/batch", batch, format="json")
    assert refused.status_code == 400
    assert list(refused.json()["errors"]) == ["events[2].data.amount"]
    assert Event.objects.filter(tenant=alice.tenant).count() == 0


def test_warn_accepts_and_counts(alice, settings):
    settings.HOMING_VALIDATE_EVENTS = "warn"
    _catalog(alice)
    counters.flush()
    before = counters.read_all().get("events_invalid", 0)
    assert _post(alice, {"amount": "lots"}).status_code == 202
    assert _post(alice, {"amount": 1, "lines": []}).status_code == 202
    counters.flush()
    assert counters.read_all().get("events_invalid", 0) == before + 1
    metrics = alice.client.get("/metrics").content.decode()
    assert f"homing_events_invalid_total {before + 1}" in metrics
