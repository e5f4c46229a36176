"""The console shows each delivery's sequence and an endpoint's last one."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from deliveries.models import Delivery
from tests.factories import endpoint_id_via_api


@pytest.fixture
def staff(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_user("sam", "s@example.com", "pw", is_staff=True))
    return client


def test_the_endpoint_and_delivery_pages_show_sequences(staff, alice):
    endpoint = endpoint_id_via_api(alice)
    events = [
        alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
        for _ in range(3)
    ]
    page = staff.get(f"/endpoints/{endpoint}/").content.decode()
    assert re.search(r"<dt>Last sequence</dt><dd>3</dd>", page)
    rows = re.findall(r'<tr[^>]*>\s*<td class="num">(\d+)</td>', page)
    assert rows == ["3", "2", "1"]  # newest first

    second = Delivery.objects.get(event_id=events[1]["id"])
    detail = staff.get(f"/deliveries/{second.id}/").content.decode()
    assert "<dt>Sequence</dt><dd>2 (homing-sequence)</dd>" in detail


def test_the_delivery_page_says_what_a_waiting_delivery_waits_for(staff, alice):
    endpoint_id_via_api(alice)
    first, second = (
        alice.client.post(
            "/api/v1/events",
            {"type": "a.b", "data": {}, "ordering_key": "order-7"},
            format="json",
        ).json()
        for _ in range(2)
    )
    head = Delivery.objects.get(event_id=first["id"])
    waiting = Delivery.objects.get(event_id=second["id"])
    page = staff.get(f"/deliveries/{waiting.id}/").content.decode()
    assert "<code>order-7</code>" in page
    assert f'waits for <a href="/deliveries/{head.id}/"><code>{head.id}</code></a>' in page
    assert "first of its key since" in staff.get(f"/deliveries/{head.id}/").content.decode()
