"""One selector per question (STYLE habit 15): the dead-letter API lists what
dlq.selectors.dead_letters_matching matches (the selector the console and bulk replay
use), and the console's dashboard shows the queue gauges /metrics exposes."""

from __future__ import annotations

import re

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
from tests.factories import consumer_key_via_api, dead_letter_via_api, endpoint_id_via_api
from webhooks.models import Endpoint
from webhooks.scope import Scope

FILTERS = [
    {},
    {"event_type": "invoice.sent"},
    {"replayed": "true"},
    {"replayed": "false"},
    {"replayed": "0", "event_type": "order.paid"},
]


def _ids(response):
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["results"]]


def _criteria(query):
    # What each ?name= means in dlq.selectors.Criteria.
    criteria = dict(query)
    if "replayed" in criteria:
        criteria["replayed"] = criteria["replayed"] in ("true", "1")
    return criteria


@pytest.fixture
def queue(alice, bob):
    """alice: letters on her own endpoint and on carol's (one replayed, one discarded);
    bob: one letter that alice must never see."""
    own = endpoint_id_via_api(alice)
    carols = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/c", "owner": "carol"}, format="json"
    ).json()["id"]
    dead_letter_via_api(alice, own, "order.paid")
    dead_letter_via_api(alice, carols, "order.paid")
    dead_letter_via_api(alice, carols, "invoice.sent")
    replayed = dead_letter_via_api(alice, own, "invoice.sent")
    DeadLetter.objects.filter(pk=replayed.pk).update(replayed_at=timezone.now())
    discarded = dead_letter_via_api(alice, carols, "order.paid")
    DeadLetter.objects.filter(pk=discarded.pk).update(discarded_at=timezone.now())
    dead_letter_via_api(bob, endpoint_id_via_api(bob), "order.paid")
    return {"own": own, "carols": carols}


@pytest.mark.parametrize("query", FILTERS)
def test_the_api_lists_what_the_selector_matches_for_a_tenant_and_a_consumer(alice, queue, query):
    carol = APIClient()
    carol.credentials(HTTP_AUTHORIZATION=f"Bearer {consumer_key_via_api(alice, 'carol')}")
    for client, scope in (
        (alice.client, Scope(tenant=alice.tenant)),
        (carol, Scope(tenant=alice.tenant, owner="carol")),
    ):
        for endpoint in (None, queue["own"], queue["carols"]):
            params = {**query, **({"endpoint": endpoint} if endpoint else {})}
            selected = dead_letters_matching(criteria=scope.criteria(**_criteria(params)))
            expected = list(selected.order_by("-dead_at", "-id").values_list("id", flat=True))
            assert _ids(client.get("/api/v1/dead-letters", params)) == expected, (scope, params)


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
