"""One selector per question (STYLE habit 15): the dead-letter API (for a tenant and
for a consumer), the console's and the portal's dead-letter pages all list exactly the
letters the test itself expects, so a wrong selector fails here whoever calls it; and
the console's dashboard shows the queue gauges /metrics exposes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from config import gauges as metrics_gauges
from deliveries.models import Delivery
from dlq.api import views as dlq_views
from dlq.models import DeadLetter
from dlq.selectors import QueueGauges, dead_letters_matching
from tests.factories import (
    consumer_key_via_api,
    dead_letter_via_api,
    endpoint_id_via_api,
    portal_link_via_api,
)
from webhooks.models import Endpoint

# Each query as the API takes it; the console's form spells `replayed` yes/no.
FILTERS = [
    {},
    {"event_type": "invoice.sent"},
    {"replayed": "true"},
    {"replayed": "false"},
    {"replayed": "0", "event_type": "order.paid"},
]


@dataclass(frozen=True)
class Letter:
    """What the test made, written down by the test: the expectation, not a query."""

    id: str
    tenant: str
    owner: str | None
    endpoint: str
    event_type: str
    dead_at: datetime
    replayed: bool = False
    discarded: bool = False


def expected(letters, *, tenant=None, owner=None, endpoint=None, event_type=None, replayed=None):
    """The ids a listing must show, newest first, worked out from the test's own notes."""
    kept = [
        letter
        for letter in letters
        if not letter.discarded
        and tenant in (None, letter.tenant)
        and owner in (None, letter.owner)
        and endpoint in (None, letter.endpoint)
        and event_type in (None, letter.event_type)
        and replayed in (None, letter.replayed)
    ]
    return [letter.id for letter in sorted(kept, key=lambda x: (x.dead_at, x.id), reverse=True)]


def _replayed(value: str | None) -> bool | None:
    return None if value is None else value in ("true", "1")


def _ids(response):
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["results"]]


@pytest.fixture
def queue(alice, bob):
    """alice: letters on her own endpoint and on carol's (one replayed, one discarded);
    bob: one letter that alice must never see. Each died a minute after the one before."""
    own = endpoint_id_via_api(alice)
    carols = endpoint_id_via_api(alice, "http://127.0.0.1:9/c", owner="carol")
    bobs = endpoint_id_via_api(bob)
    start = timezone.now() - timedelta(hours=1)
    made = [
        (alice, own, None, "order.paid", {}),
        (alice, carols, "carol", "order.paid", {}),
        (alice, carols, "carol", "invoice.sent", {}),
        (alice, own, None, "invoice.sent", {"replayed": True}),
        (alice, carols, "carol", "order.paid", {"discarded": True}),
        (bob, bobs, None, "order.paid", {}),
    ]
    letters = []
    for n, (actor, endpoint, owner, event_type, state) in enumerate(made):
        dead_at = start + timedelta(minutes=n)
        row = dead_letter_via_api(actor, endpoint, event_type)
        DeadLetter.objects.filter(pk=row.pk).update(
            dead_at=dead_at,
            replayed_at=dead_at if state.get("replayed") else None,
            discarded_at=dead_at if state.get("discarded") else None,
        )
        letters.append(
            Letter(row.pk, actor.tenant.pk, owner, endpoint, event_type, dead_at, **state)
        )
    return {"own": own, "carols": carols, "bobs": bobs, "letters": letters}


@pytest.mark.parametrize("query", FILTERS)
def test_the_api_lists_the_letters_the_test_expects_for_a_tenant_and_a_consumer(
    alice, queue, query
):
    carol = APIClient()
    carol.credentials(HTTP_AUTHORIZATION=f"Bearer {consumer_key_via_api(alice, 'carol')}")
    for client, owner in ((alice.client, None), (carol, "carol")):
        for endpoint in (None, queue["own"], queue["carols"], queue["bobs"]):
            params = {**query, **({"endpoint": endpoint} if endpoint else {})}
            want = expected(
                queue["letters"],
                tenant=alice.tenant.pk,
                owner=owner,
                endpoint=endpoint,
                event_type=query.get("event_type"),
                replayed=_replayed(query.get("replayed")),
            )
            assert _ids(client.get("/api/v1/dead-letters", params)) == want, (owner, params)
    # The fixture is not empty-handed: a wrong filter cannot pass on two empty lists.
    assert len(expected(queue["letters"], tenant=alice.tenant.pk)) == 4


@pytest.mark.parametrize("query", FILTERS)
def test_the_console_lists_the_letters_the_test_expects(alice, bob, queue, query):
    staff = Client()
    staff.force_login(User.objects.create_user("olivia", "o@example.com", "pw", is_staff=True))
    replayed = _replayed(query.get("replayed"))
    form = {**query, "replayed": {None: "", True: "yes", False: "no"}[replayed]}
    for tenant in (None, alice.tenant.pk, bob.tenant.pk):
        for endpoint in (None, queue["own"], queue["carols"]):
            params = {**form, "tenant": tenant or "", "endpoint": endpoint or ""}
            page = staff.get("/dead-letters/", params)
            assert page.status_code == 200
            shown = re.findall(r'<tr id="([^"]+)"', page.content.decode())
            want = expected(
                queue["letters"],
                tenant=tenant,
                endpoint=endpoint,
                event_type=query.get("event_type"),
                replayed=replayed,
            )
            assert shown == want, params


def test_the_portal_lists_the_letters_the_test_expects(alice, queue):
    carol = Client()
    token = portal_link_via_api(alice, "carol").split("#", 1)[1]
    assert carol.post("/portal/session", {"link": token}).status_code in (200, 302)
    page = carol.get(f"/portal/endpoints/{queue['carols']}/dead-letters/")
    assert page.status_code == 200
    shown = re.findall(r'data-letter="([^"]+)"', page.content.decode())
    assert shown == expected(queue["letters"], owner="carol", endpoint=queue["carols"])
    assert len(shown) == 2
    # alice's own endpoint is not carol's: the portal does not show it at all.
    assert carol.get(f"/portal/endpoints/{queue['own']}/dead-letters/").status_code == 404


def test_the_api_filters_through_the_selector(alice, queue, monkeypatch):
    asked = []

    def spy(*, criteria):
        asked.append(criteria)
        return dead_letters_matching(criteria=criteria)

    monkeypatch.setattr(dlq_views, "dead_letters_matching", spy)
    alice.client.get(f"/api/v1/dead-letters?endpoint={queue['own']}&replayed=false")
    assert asked == [{"endpoint": queue["own"], "replayed": False, "tenant": alice.tenant.pk}]


def _figure(page: str, label: str) -> int:
    found = re.search(rf'{label}</span>\s*<span class="figure">(\d+)</span>', page)
    assert found, label
    return int(found.group(1))


def _metric(text: str, name: str) -> int:
    found = re.search(rf"^{re.escape(name)} (\d+)$", text, re.MULTILINE)
    assert found, name
    return int(found.group(1))


def test_the_dashboard_shows_the_figures_metrics_exposes(alice, queue):
    Endpoint.objects.filter(pk=queue["own"]).update(circuit_state=Endpoint.Circuit.OPEN)
    Endpoint.objects.filter(pk=queue["carols"]).update(circuit_state=Endpoint.Circuit.HALF_OPEN)
    for _ in range(3):
        alice.client.post("/api/v1/events", {"type": "order.paid", "data": {}}, format="json")
    metrics_gauges._cached = None  # a scrape of an earlier test is not this one's

    staff = Client()
    staff.force_login(User.objects.create_user("olivia", "o@example.com", "pw", is_staff=True))
    page = staff.get("/").content.decode()
    scraped = Client().get("/metrics").content.decode()

    assert _figure(page, "Open circuits") == _metric(scraped, "homing_open_circuits") == 2
    assert _figure(page, "Dead letters waiting") == _metric(scraped, "homing_dead_letters") == 4
    for status in Delivery.Status.values:
        shown = re.search(rf'class="status-{status}"><dt>{status}</dt><dd>(\d+)</dd>', page)
        assert shown, status
        assert int(shown.group(1)) == _metric(scraped, f'homing_deliveries{{status="{status}"}}')


def test_the_dashboard_reads_the_dlq_gauges(db, monkeypatch):
    from console import selectors as console_selectors

    gauges = QueueGauges(
        deliveries_by_status={status: 7000 + i for i, status in enumerate(Delivery.Status.values)},
        dead_letters_waiting=4321,
        oldest_dead_letter_age=60.0,
        delivery_lag=0.0,
        open_circuits=17,
        oldest_dead_letter_at=timezone.now(),
        statuses_estimated=True,
    )
    monkeypatch.setattr(console_selectors, "queue_gauges_bounded", lambda: gauges)
    staff = Client()
    staff.force_login(User.objects.create_user("olivia", "o@example.com", "pw", is_staff=True))
    page = staff.get("/").content.decode()
    assert _figure(page, "Open circuits") == 17
    assert _figure(page, "Dead letters waiting") == 4321
    assert "≈ 7000" in page and "estimated from table statistics" in page
