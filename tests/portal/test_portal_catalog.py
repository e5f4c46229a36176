"""The portal's event-type catalog and filter editor: carol (alice's customer) reads the
catalog, subscribes and sends examples to her endpoints only, and tries filters on the
events her endpoints were sent — never on dave's."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from deliveries.models import Delivery
from tests.factories import portal_csrf_of, portal_link_via_api, portal_session_via_link
from webhooks.models import Endpoint, Event
from webhooks.services.endpoint_filters import endpoint_filter

URL = "http://127.0.0.1:9/hooks"


@pytest.fixture
def catalog(alice):
    for entry in (
        {
            "name": "order.paid",
            "description": "An order was paid.",
            "schema": {"type": "object", "properties": {"amount": {"type": "integer"}}},
            "examples": [{"amount": 4200}],
        },
        {"name": "order.sent", "description": "Shipped.", "deprecated": True},
        {"name": "invoice.paid", "examples": [{"invoice": "in_1"}]},
    ):
        assert alice.client.post("/api/v1/event-types", entry, format="json").status_code == 201


@pytest.fixture
def shop(alice):
    ids = {}
    for owner, types in (("carol", ["invoice.paid"]), ("dave", [])):
        ids[owner] = alice.client.post(
            "/api/v1/endpoints", {"url": URL, "owner": owner, "event_types": types}, format="json"
        ).json()["id"]
    for amount in (5, 500):
        alice.client.post(
            "/api/v1/events", {"type": "invoice.paid", "data": {"amount": amount}}, format="json"
        )
    alice.client.post(
        "/api/v1/events", {"type": "order.paid", "data": {"secret": "dave's"}}, format="json"
    )
    return ids


@pytest.fixture
def carol(alice, shop):
    browser, answer = portal_session_via_link(portal_link_via_api(alice, "carol"))
    assert answer.status_code == 302
    return browser


def test_the_catalog_is_grouped_by_prefix_with_schema_and_example(carol, catalog):
    page = carol.get("/portal/event-types/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.index("<h2>invoice</h2>") < html.index("<h2>order</h2>")
    assert "An order was paid." in html and "deprecated" in html
    assert "&quot;amount&quot;: 4200" in html and "&quot;integer&quot;" in html


def test_carol_subscribes_her_endpoint_from_the_catalog(carol, catalog, shop):
    page = carol.get("/portal/event-types/")
    assert shop["dave"] not in page.content.decode()  # only her endpoints to choose
    answer = carol.post(
        "/portal/event-types/order.paid/action",
        {"portal_csrf": portal_csrf_of(page), "endpoint": shop["carol"], "action": "subscribe"},
    )
    assert answer.status_code == 302
    assert Endpoint.objects.get(pk=shop["carol"]).event_types == ["invoice.paid", "order.paid"]
    refused = carol.post(
        "/portal/event-types/order.paid/action",
        {"portal_csrf": portal_csrf_of(page), "endpoint": shop["dave"], "action": "subscribe"},
    )
    assert refused.status_code == 404
    assert Endpoint.objects.get(pk=shop["dave"]).event_types == []


def test_send_an_example_sends_the_types_example_to_that_endpoint_only(carol, catalog, shop):
    page = carol.get("/portal/event-types/")
    answer = carol.post(
        "/portal/event-types/order.paid/action",
        {"portal_csrf": portal_csrf_of(page), "endpoint": shop["carol"], "action": "example"},
    )
    assert answer.status_code == 302
    event = Event.objects.get(type="order.paid", data={"amount": 4200})
    assert list(Delivery.objects.filter(event=event).values_list("endpoint_id", flat=True)) == [
        shop["carol"]
    ]


def test_the_filter_editor_tries_and_saves_a_filter(carol, shop):
    editor = carol.get(f"/portal/endpoints/{shop['carol']}/filter")
    assert editor.status_code == 200
    tried = carol.post(
        f"/portal/endpoints/{shop['carol']}/filter/try",
        {
            "portal_csrf": portal_csrf_of(editor),
            "filter": '{"data": {"amount": {"$gte": 100}}}',
            "event_type": "invoice.paid",
            "action": "try",
        },
    )
    html = tried.content.decode()
    assert "1 of 2 recent" in html and "filter.data.amount.$gte: 5 is not ≥ 100" in html
    saved = carol.post(
        f"/portal/endpoints/{shop['carol']}/filter/save",
        {
            "portal_csrf": portal_csrf_of(editor),
            "filter": '{"data": {"amount": {"$gte": 100}}}',
            "event_type": "invoice.paid",
            "action": "save",
        },
    )
    assert saved.status_code == 302
    saved_filter = endpoint_filter(endpoint=Endpoint.objects.get(pk=shop["carol"]))
    assert saved_filter == {"data": {"amount": {"$gte": 100}}}


def test_the_filter_editor_names_the_fault_of_a_bad_filter(carol, shop):
    editor = carol.get(f"/portal/endpoints/{shop['carol']}/filter")
    answer = carol.post(
        f"/portal/endpoints/{shop['carol']}/filter/save",
        {
            "portal_csrf": portal_csrf_of(editor),
            "filter": '{"data": {"a": {"$gte": true}}}',
            "action": "save",
        },
    )
    assert answer.status_code == 400
    assert "filter.data.a.$gte: expected a number or a string" in answer.content.decode()
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop["carol"])) is None


def test_carol_never_tries_filters_on_daves_events(carol, shop):
    editor = carol.get(f"/portal/endpoints/{shop['carol']}/filter")
    tried = carol.post(
        f"/portal/endpoints/{shop['carol']}/filter/try",
        {
            "portal_csrf": portal_csrf_of(editor),
            "filter": "",
            "event_type": "order.paid",
            "action": "try",
        },
    )
    assert "dave&#x27;s" not in tried.content.decode() and "0 of 0" in tried.content.decode()
    assert carol.get(f"/portal/endpoints/{shop['dave']}/filter").status_code == 404


def test_a_read_only_session_tries_but_cannot_save(alice, shop, catalog):
    browser, _ = portal_session_via_link(portal_link_via_api(alice, "carol", read_only=True))
    editor = browser.get(f"/portal/endpoints/{shop['carol']}/filter")
    assert "Save filter" not in editor.content.decode()
    body = {"portal_csrf": portal_csrf_of(editor), "filter": "{}", "event_type": "invoice.paid"}
    assert (
        browser.post(
            f"/portal/endpoints/{shop['carol']}/filter/try", {**body, "action": "try"}
        ).status_code
        == 200
    )
    assert f"/portal/endpoints/{shop['carol']}/filter/save" not in editor.content.decode()
    refused = browser.post(
        f"/portal/endpoints/{shop['carol']}/filter/save", {**body, "action": "save"}
    )
    assert refused.status_code == 403
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop["carol"])) is None
    catalog_page = browser.get("/portal/event-types/").content.decode()
    assert "Subscribe" not in catalog_page and "Send example" not in catalog_page


def test_a_filter_no_key_opens_leaves_carols_pages_up_and_she_replaces_it(
    alice, carol, shop, settings
):
    set_filter = {"filter": {"data": {"amount": 500}}}
    patched = alice.client.patch(f"/api/v1/endpoints/{shop['carol']}", set_filter, format="json")
    assert patched.status_code == 200
    # HOMING_ENCRYPTION_KEY changed without a rotation: the old key is gone.
    settings.HOMING_ENCRYPTION_KEY = [Fernet.generate_key().decode()]

    endpoint_page = carol.get(f"/portal/endpoints/{shop['carol']}/")
    assert endpoint_page.status_code == 200
    assert "The filter cannot be read" in endpoint_page.content.decode()
    editor = carol.get(f"/portal/endpoints/{shop['carol']}/filter")
    assert editor.status_code == 200
    assert "The saved filter cannot be read" in editor.content.decode()
    body = {"portal_csrf": portal_csrf_of(editor), "filter": '{"data": {"amount": 5}}'}
    tried = carol.post(
        f"/portal/endpoints/{shop['carol']}/filter/try", {**body, "event_type": "invoice.paid"}
    )
    assert tried.status_code == 200 and "1 of 2 recent" in tried.content.decode()

    assert carol.post(f"/portal/endpoints/{shop['carol']}/filter/save", body).status_code == 302
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop["carol"])) == {
        "data": {"amount": 5}
    }
    assert "cannot be read" not in carol.get(f"/portal/endpoints/{shop['carol']}/").content.decode()
