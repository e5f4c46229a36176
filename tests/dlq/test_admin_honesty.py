"""The Django admin shows raw rows but offers no "Add" for what the platform makes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.factories import dead_letter_via_api, endpoint_id_via_api


@pytest.fixture
def superuser(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


@pytest.mark.parametrize("model", ["dlq/deadletter", "deliveries/delivery", "deliveries/attempt"])
def test_there_is_no_add_for_platform_made_rows(superuser, model):
    assert superuser.get(f"/admin/{model}/add/").status_code == 403
    assert f'href="/admin/{model}/add/"' not in superuser.get(f"/admin/{model}/").content.decode()


def test_lists_show_tenant_and_endpoint_url(superuser, alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    for path in ["/admin/dlq/deadletter/", "/admin/deliveries/delivery/"]:
        body = superuser.get(path).content.decode()
        assert alice.tenant.name in body and "http://127.0.0.1:9/h" in body
    # State columns cannot be edited: the change form shows them read-only.
    page = superuser.get(
        f"/admin/deliveries/delivery/{letter.delivery_id}/change/"
    ).content.decode()
    assert 'name="status"' not in page and 'name="next_attempt_at"' not in page
