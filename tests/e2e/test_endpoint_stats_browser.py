"""The endpoint statistics chart in the consumer portal, in headless Chromium: Carol sees
her endpoint's attempts by outcome, success rate and durations, for each period. A
screenshot lands in screenshots/portal-endpoint-stats.png for a human look."""

from __future__ import annotations

import os

import pytest
from django.utils import timezone

from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.results import SendResult
from deliveries.worker.claims import deliveries_claim
from tests.browser import new_page, shoot
from tests.factories import portal_link_via_http

pytestmark = pytest.mark.e2e

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_carol_sees_her_endpoints_attempts_as_a_chart(
    browser,
    live_server,
    make_actor,
):
    alice = make_actor("Alice Payments")
    carols = alice.client.post(
        "/api/v1/endpoints", {"url": "http://127.0.0.1:9/carol", "owner": "carol"}, format="json"
    ).json()["id"]
    answers = [(200, 40)] * 6 + [(503, 900)] * 3 + [(404, 30)]
    for n in range(len(answers)):
        alice.client.post("/api/v1/events", {"type": "order.paid", "data": {"n": n}}, format="json")
    claimed = deliveries_claim(limit=50, policy=current_policy())
    attempts_record(
        outcomes=[
            Attempted(d, SendResult(code, None, b"", None, ms), timezone.now(), current_policy())
            for d, (code, ms) in zip(claimed, answers, strict=True)
        ]
    )

    page = new_page(browser)
    page.goto(portal_link_via_http(live_server.url, alice.key, "carol"))
    page.wait_for_selector("h1:text('Your webhook endpoints')")
    page.goto(f"{live_server.url}/portal/endpoints/{carols}/?period=1h")
    chart = page.locator("svg.endpoint-chart")
    chart.wait_for()

    figures = page.locator("dl.figures").inner_text()
    assert "60 %" in figures  # 6 of 10
    assert "6 ok · 3 retryable · 1 fatal" in figures
    assert "6 succeeded · 1 died" in figures
    assert "3 pending · 0 delivering" in figures  # the 503s wait for their retries
    legend = page.locator("section.stats ul.legend").inner_text()
    assert "success (6)" in legend and "retryable failure (3)" in legend
    # Each outcome is drawn; the success line rises above the baseline in the last minute.
    box = chart.bounding_box()
    assert box and box["width"] > 600 and box["height"] > 150
    success = page.locator("svg.endpoint-chart polyline.success").get_attribute("points")
    assert success and len(success.split()) == 60
    ys = [float(point.split(",")[1]) for point in success.split()]
    assert min(ys) < max(ys)
    assert ys[-1] == min(ys)
    assert page.locator("svg.endpoint-chart text", has_text="No attempts").count() == 0
    shoot(page, "endpoint-stats")

    page.click("nav.periods a:text('7d')")
    page.wait_for_selector("nav.periods strong:text('7d')")
    assert (
        len(page.locator("svg.endpoint-chart polyline.success").get_attribute("points").split())
        == 168
    )
    assert "6 ok · 3 retryable · 1 fatal" in page.locator("dl.figures").inner_text()
