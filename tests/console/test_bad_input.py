"""The console answers absurd filters and ids with a page or a 404, never a 500."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.factories import dead_letter_via_api, endpoint_id_via_api


@pytest.fixture
def admin(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("ada", "a@example.com", "pw"))
    return client


@pytest.mark.parametrize(
    "query",
    [
        "dead_before=9999-12-31",
        "dead_after=9999-12-31",
        "dead_after=0001-01-01",
        "dead_before=0001-01-01",
        "dead_after=1-1-1",
        "dead_before=2026-02-30",
    ],
)
def test_an_absurd_date_filter_is_shown_as_a_form_error(admin, alice, query):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    response = admin.get(f"/dead-letters/?{query}")
    assert response.status_code == 200
    body = response.content.decode()
    assert "field-error" in body
    assert letter.id in body  # an invalid filter filters nothing


def test_a_sound_date_filter_still_filters(admin, alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    assert letter.id in admin.get("/dead-letters/?dead_before=9998-12-31").content.decode()
    assert letter.id not in admin.get("/dead-letters/?dead_before=2001-01-01").content.decode()


@pytest.mark.parametrize(
    "query", ["tenant=%00", "endpoint=a%00", "event_type=%00", "reason=%00", "after=%00", "job=%00"]
)
def test_a_nul_in_a_console_filter_is_a_400(admin, alice, query):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    response = admin.get(f"/dead-letters/?{query}")
    assert response.status_code == 400
    assert letter.id not in response.content.decode()


@pytest.mark.parametrize(
    "path",
    [
        "/deliveries/%00/",
        "/endpoints/%00/",
        "/dead-letters/jobs/%00",
        "/admin/webhooks/endpoint/%00/change/",
        "/admin/dlq/deadletter/a%00b/change/",
    ],
)
def test_a_nul_in_a_console_or_admin_id_is_a_404(admin, path):
    response = admin.get(path)
    assert response.status_code == 404
    assert "Not found" in response.content.decode()


def test_a_nul_in_a_console_post_id_is_a_404(admin):
    assert admin.post("/dead-letters/%00/replay").status_code == 404


def test_a_nul_in_an_admin_search_is_a_400(admin):
    assert admin.get("/admin/webhooks/endpoint/?q=%00").status_code == 400


def test_a_nul_in_a_selected_id_is_refused_and_changes_nothing(admin, alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    response = admin.post(
        "/dead-letters/selected", {"action": "replay", "ids": [letter.id, "dl_\x00"]}
    )
    assert response.status_code in (302, 400)
    letter.refresh_from_db()
    assert letter.replayed_at is None
