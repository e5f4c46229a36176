"""The portal's event-type catalog and filter editor in headless Chromium: Carol opens her
link, reads the catalog, subscribes her endpoint to a type and sends its example, then
writes a filter, tries it on recent events and saves it; the next events follow it.
Screenshots land in screenshots/portal-catalog-*.png (git-ignored) for a human look."""

from __future__ import annotations

import os

import pytest

from deliveries.models import Delivery
from tests.browser import new_page, shoot
from tests.factories import portal_link_via_http
from webhooks.models import Endpoint, Event

pytestmark = pytest.mark.e2e

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

URL = "http://127.0.0.1:9/hooks"


def test_carol_uses_the_catalog_and_the_filter_editor(browser, live_server, make_actor):
    alice = make_actor("Alice Payments")
    for entry in (
        {
            "name": "invoice.paid",
            "description": "An invoice was paid in full.",
            "schema": {
                "type": "object",
                "required": ["amount"],
                "properties": {"amount": {"type": "integer", "minimum": 0}},
            },
            "examples": [{"amount": 1200, "currency": "EUR"}],
        },
        {"name": "invoice.voided", "description": "An invoice was cancelled."},
        {"name": "order.sent", "description": "An order left the warehouse.", "deprecated": True},
    ):
        assert alice.client.post("/api/v1/event-types", entry, format="json").status_code == 201
    endpoint = alice.client.post(
        "/api/v1/endpoints",
        {"url": URL, "owner": "carol", "event_types": ["order.sent"]},
        format="json",
    ).json()["id"]
    alice.client.post("/api/v1/events", {"type": "order.sent", "data": {"n": 0}}, format="json")

    page = new_page(browser)
    page.goto(portal_link_via_http(live_server.url, alice.key, "carol"))
    page.wait_for_url("**/portal/endpoints/")
    page.click("text=Event types")
    page.wait_for_url("**/portal/event-types/")
    assert page.locator("h2", has_text="invoice").is_visible()
    assert page.locator("#type-invoice\\.paid pre").first.inner_text().startswith("{")
    shoot(page, "catalog")

    paid = page.locator("#type-invoice\\.paid")
    paid.locator("button[value=subscribe]").click()
    page.wait_for_url("**/portal/event-types/?done=subscribed")
    assert Endpoint.objects.get(pk=endpoint).event_types == ["order.sent", "invoice.paid"]
    page.locator("#type-invoice\\.paid button[value=example]").click()
    page.wait_for_url("**/portal/event-types/?done=example")
    example = Event.objects.get(type="invoice.paid")
    assert example.data == {"amount": 1200, "currency": "EUR"}
    assert Delivery.objects.get(event=example).endpoint_id == endpoint

    for amount in (5, 250, 40):
        alice.client.post(
            "/api/v1/events", {"type": "invoice.paid", "data": {"amount": amount}}, format="json"
        )
    page.goto(f"{live_server.url}/portal/endpoints/{endpoint}/")
    page.click("text=Edit and try")
    page.fill("#filter-text", '{"data": {"amount": {"$gte": 100}}}')
    page.select_option("select[name=event_type]", "invoice.paid")
    page.click("button[value=try]")
    results = page.locator("table.filter-results")
    results.wait_for()
    assert "2 of 4 recent" in page.content()
    assert "filter.data.amount.$gte: 5 is not ≥ 100" in results.inner_text()
    shoot(page, "catalog-filter-tried")
    page.click("button[value=save]")
    page.wait_for_url(f"**/portal/endpoints/{endpoint}/?notice=saved")
    assert "$gte" in page.locator("pre.payload").first.inner_text()
    shoot(page, "catalog-filter-saved")

    small = alice.client.post(
        "/api/v1/events", {"type": "invoice.paid", "data": {"amount": 1}}, format="json"
    ).json()
    large = alice.client.post(
        "/api/v1/events", {"type": "invoice.paid", "data": {"amount": 999}}, format="json"
    ).json()
    assert small["deliveries"] == [] and len(large["deliveries"]) == 1
