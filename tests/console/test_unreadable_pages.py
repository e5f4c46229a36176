"""Pages about an endpoint whose stored secrets no key of HOMING_ENCRYPTION_KEY opens (the
key changed without a rotation) stay up and say what cannot be read: the console's
endpoint page (Olivia, staff), carol's portal page and her "reveal secret", the Django
admin's change form, which keeps what it cannot show unless it is replaced."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client

from tests.certificates import Authority
from tests.factories import (
    endpoint_via_api_with_lost_key,
    portal_csrf_of,
    portal_link_via_api,
    portal_session_via_link,
)
from webhooks.models import Endpoint

FILTER = {"type": "invoice.paid"}
HEADERS = {"Authorization": "Bearer carol-token"}


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority()


@pytest.fixture
def lost(alice, settings, authority) -> str:
    return endpoint_via_api_with_lost_key(
        alice,
        settings,
        owner="carol",
        filter=FILTER,
        headers=HEADERS,
        tls_client_certificate=authority.client_pem("carol-client"),
    )["id"]


@pytest.fixture
def olivia(db) -> Client:
    user = User.objects.create_user("olivia", "o@example.com", "pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="change_endpoint"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def carol(alice, lost) -> Client:
    browser, answer = portal_session_via_link(portal_link_via_api(alice, "carol"))
    assert answer.status_code == 302
    return browser


def stored(endpoint_id: str) -> tuple[str, str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT headers::text, filter, tls_client_certificate FROM webhooks_endpoint "
            "WHERE id = %s",
            [endpoint_id],
        )
        return cursor.fetchone()


def test_the_console_page_says_what_cannot_be_read(olivia, lost):
    page = olivia.get(f"/endpoints/{lost}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Cannot be read — replace it: the signing secret (rotate it)" in html
    assert "the extra headers&#x27; values" in html and "the client certificate" in html
    assert "The filter cannot be read" in html
    assert 'name="remove_certificate"' in html  # the unreadable one can be removed


def test_carols_portal_page_stays_up_and_revealing_the_lost_secret_says_to_rotate(carol, lost):
    path = f"/portal/endpoints/{lost}/"
    page = carol.get(path)
    assert page.status_code == 200
    assert "Cannot be read — replace it" in page.content.decode()
    revealed = carol.post(
        f"{path}action", {"action": "reveal", "portal_csrf": portal_csrf_of(page)}
    )
    assert revealed.status_code == 409
    assert "signing secret cannot be read" in revealed.content.decode()
    rotated = carol.post(f"{path}action", {"action": "rotate", "portal_csrf": portal_csrf_of(page)})
    assert rotated.status_code == 200 and "whsec_" in rotated.content.decode()


def test_the_admin_form_shows_what_it_cannot_read_and_keeps_it_on_save(alice, lost):
    root = Client()
    root.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    change = f"/admin/webhooks/endpoint/{lost}/change/"
    form = root.get(change)
    assert form.status_code == 200
    assert form.content.decode().count("Cannot be read: no key of HOMING_ENCRYPTION_KEY") == 2
    before = stored(lost)

    saved = root.post(
        change,
        {
            "url": "http://127.0.0.1:9/h",
            "description": "renamed",
            "event_types": "[]",
            "rate_limit": "",
            "headers": "null",  # as the form showed them
            "filter": "null",
            "is_active": "on",
            "owner": "carol",
            "signing": "hmac-sha256",
        },
    )
    assert saved.status_code == 302, saved.content.decode()[-3000:]
    assert Endpoint.objects.get(pk=lost).description == "renamed"
    assert stored(lost) == before  # what it could not read is left as it was
