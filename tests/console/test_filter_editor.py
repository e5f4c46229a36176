"""The console's filter editor (CONTRACT sections 2 and 7): Olivia, staff with
webhooks.change_endpoint, tries a filter on the last events of a type of alice's and saves
it; Victor, staff without it, tries but has no save control and his forged save answers
403. Bob's events are never among alice's. A filter no configured key opens leaves the
pages up, says so, and can be replaced."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Permission, User
from django.test import Client

from tests.factories import endpoint_id_via_api, event_via_api
from webhooks.models import Endpoint
from webhooks.services.endpoint_filters import endpoint_filter

BIG = '{"data": {"amount": {"$gte": 100}}}'


def staff_client(username: str, *codenames: str) -> Client:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def olivia(db) -> Client:
    return staff_client("olivia", "change_endpoint")


@pytest.fixture
def victor(db) -> Client:
    return staff_client("victor", "change_deadletter", "change_delivery")


@pytest.fixture
def shop(alice, bob) -> str:
    endpoint = endpoint_id_via_api(alice, event_types=["invoice.paid"])
    for amount in (5, 500):
        event_via_api(alice, "invoice.paid", {"amount": amount})
    event_via_api(bob, "invoice.paid", {"amount": 7, "bobs": "secret"})
    return endpoint


def test_olivia_tries_a_filter_on_the_tenants_last_events_and_saves_it(olivia, shop):
    editor = olivia.get(f"/endpoints/{shop}/filter")
    html = editor.content.decode()
    assert editor.status_code == 200
    assert '<option value="invoice.paid" selected>' in html
    assert f'formaction="/endpoints/{shop}/filter/save"' in html

    tried = olivia.post(
        f"/endpoints/{shop}/filter/try", {"filter": BIG, "event_type": "invoice.paid"}
    )
    html = tried.content.decode()
    assert tried.status_code == 200
    assert "1 of 2 recent" in html and "filter.data.amount.$gte: 5 is not ≥ 100" in html
    assert "bobs" not in html  # another tenant's event is never tried
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop)) is None  # trying saves nothing

    saved = olivia.post(
        f"/endpoints/{shop}/filter/save", {"filter": BIG, "event_type": "invoice.paid"}
    )
    assert saved.status_code == 302 and saved["Location"] == f"/endpoints/{shop}/"
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop)) == {
        "data": {"amount": {"$gte": 100}}
    }
    page = olivia.get(f"/endpoints/{shop}/").content.decode()
    assert "Filter saved." in page and "&quot;$gte&quot;: 100" in page
    assert f'href="/endpoints/{shop}/filter">Edit and try' in page


def test_saving_an_invalid_filter_names_its_path_and_changes_nothing(olivia, shop):
    olivia.post(f"/endpoints/{shop}/filter/save", {"filter": BIG})
    refused = olivia.post(
        f"/endpoints/{shop}/filter/save",
        {"filter": '{"data": {"a": {"$gte": true}}}', "event_type": "invoice.paid"},
    )
    assert refused.status_code == 400
    html = refused.content.decode()
    assert "filter.data.a.$gte: expected a number or a string" in html
    assert "$gte&quot;: true" in html  # the text stays in the editor to be corrected
    not_json = olivia.post(f"/endpoints/{shop}/filter/save", {"filter": "{data"})
    assert not_json.status_code == 400 and "filter: Not JSON" in not_json.content.decode()
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop)) == {
        "data": {"amount": {"$gte": 100}}
    }


def test_an_empty_filter_saved_removes_the_filter(olivia, shop):
    olivia.post(f"/endpoints/{shop}/filter/save", {"filter": BIG})
    assert olivia.post(f"/endpoints/{shop}/filter/save", {"filter": "  "}).status_code == 302
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop)) is None
    assert (
        "No filter: every event of its types." in olivia.get(f"/endpoints/{shop}/").content.decode()
    )


def test_victor_tries_but_has_no_save_control_and_his_forged_save_is_refused(victor, shop):
    editor = victor.get(f"/endpoints/{shop}/filter")
    html = editor.content.decode()
    assert editor.status_code == 200
    assert "Save filter" not in html and f"/endpoints/{shop}/filter/save" not in html
    page = victor.get(f"/endpoints/{shop}/").content.decode()
    assert f'href="/endpoints/{shop}/filter">Try ' in page

    tried = victor.post(
        f"/endpoints/{shop}/filter/try", {"filter": BIG, "event_type": "invoice.paid"}
    )
    assert tried.status_code == 200 and "1 of 2 recent" in tried.content.decode()

    forged = victor.post(f"/endpoints/{shop}/filter/save", {"filter": BIG})
    assert forged.status_code == 403
    assert "webhooks.change_endpoint" in forged.content.decode()
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop)) is None


def test_only_staff_reach_the_editor(alice, shop):
    assert Client().get(f"/endpoints/{shop}/filter")["Location"].startswith("/login/")
    nosy = Client()
    nosy.force_login(User.objects.create_user("nosy", "n@example.com", "pw"))
    assert nosy.get(f"/endpoints/{shop}/filter").status_code == 403
    assert nosy.post(f"/endpoints/{shop}/filter/try", {"filter": BIG}).status_code == 403
    assert nosy.post(f"/endpoints/{shop}/filter/save", {"filter": BIG}).status_code == 403
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop)) is None


def test_an_unknown_endpoint_is_a_404(olivia):
    assert olivia.get("/endpoints/ep_nope/filter").status_code == 404
    assert olivia.post("/endpoints/ep_nope/filter/save", {"filter": BIG}).status_code == 404


def test_a_filter_no_key_opens_leaves_the_pages_up_and_can_be_replaced(
    alice, olivia, shop, settings
):
    patched = alice.client.patch(
        f"/api/v1/endpoints/{shop}", {"filter": {"type": "x"}}, format="json"
    )
    assert patched.status_code == 200
    # HOMING_ENCRYPTION_KEY changed without a rotation: the old key is gone.
    settings.HOMING_ENCRYPTION_KEY = [Fernet.generate_key().decode()]

    page = olivia.get(f"/endpoints/{shop}/")
    assert page.status_code == 200
    assert "The filter cannot be read" in page.content.decode()
    editor = olivia.get(f"/endpoints/{shop}/filter")
    html = editor.content.decode()
    assert editor.status_code == 200
    assert "The saved filter cannot be read" in html and "receives no event" in html
    assert 'spellcheck="false"></textarea>' in html  # empty, to write a new one

    replaced = olivia.post(f"/endpoints/{shop}/filter/save", {"filter": '{"type": "invoice.paid"}'})
    assert replaced.status_code == 302
    assert endpoint_filter(endpoint=Endpoint.objects.get(pk=shop)) == {"type": "invoice.paid"}
    page = olivia.get(f"/endpoints/{shop}/").content.decode()
    assert "cannot be read" not in page and "&quot;type&quot;: &quot;invoice.paid&quot;" in page
