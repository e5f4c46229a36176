"""The consumer portal in headless Chromium against a real stack: PostgreSQL, Redis, a
Celery worker, the web app on pytest-django's live server and real receivers.

Alice (a tenant) makes a portal link for her customer Carol over the REST API; Carol opens
it, adds an endpoint, tests it, and replays what failed once she fixed her receiver. Dave,
another customer of Alice, must never show up in Carol's portal. Full-page screenshots
land in screenshots/portal-*.png (git-ignored) for a human look.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.browser import new_page, shoot
from tests.factories import portal_link_via_http
from tests.processes import wait_until
from tests.receivers import Answer
from webhooks.models import Endpoint

pytestmark = pytest.mark.e2e

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_a_customer_manages_endpoints_and_replays_failures_in_the_portal(
    browser,
    live_server,
    homing,
    receiver_factory,
    make_actor,
):
    base = live_server.url
    broken = {"yes": False}
    carols = receiver_factory(
        lambda request, n: (
            Answer(status=404, body=b"gone fishing")
            if broken["yes"]
            else Answer(status=200, body=b"thanks")
        )
    )
    daves = receiver_factory()
    homing("worker")
    alice = make_actor("Alice Payments")
    dave_endpoint = alice.client.post(
        "/api/v1/endpoints",
        {"url": daves.url + "/dave-only", "owner": "dave", "description": "Dave's shop"},
        format="json",
    ).json()["id"]
    alice.client.post("/api/v1/events", {"type": "order.paid", "data": {"n": 0}}, format="json")
    alice.client.post("/api/v1/events", {"type": "invoice.sent", "data": {}}, format="json")
    daves.wait_for(2)
    dave_delivery = Delivery.objects.filter(endpoint_id=dave_endpoint)[0]

    link = portal_link_via_http(base, alice.key, "carol")
    page = new_page(browser)
    page.goto(link)
    page.wait_for_selector("h1:text('Your webhook endpoints')")
    assert "#" not in page.url  # the secret left the address bar
    assert "Dave" not in page.content() and "dave-only" not in page.content()
    shoot(page, "empty")

    # Carol adds an endpoint for the one type she wants, pointing at her receiver.
    page.click("text=Add endpoint")
    page.fill("input[name=url]", carols.url)
    page.fill("input[name=description]", "Carol's orders")
    assert page.locator("input[name=event_types]").count() == 2  # the types Alice sent
    page.check("input[name=event_types][value='order.paid']")
    shoot(page, "add-endpoint")
    page.click("button:text('Add endpoint')")
    page.wait_for_selector("text=Endpoint created")
    mine = Endpoint.objects.get(url=carols.url)
    assert mine.owner == "carol" and mine.event_types == ["order.paid"]

    # A test event arrives at her receiver and shows on the page.
    page.click("button:text('Send test event')")
    page.wait_for_selector("text=Test event sent")
    [test_request] = carols.wait_for(1)
    assert json.loads(test_request.body)["type"] == "homing.test"
    wait_until(lambda: Delivery.objects.get(endpoint=mine).status == "succeeded", timeout=30)
    page.reload()
    assert "succeeded" in page.locator("tr[data-delivery]").inner_text()
    page.click("button:text('Reveal secret')")
    assert page.locator("code.secret-value").inner_text().startswith("whsec_")
    shoot(page, "endpoint")
    page.locator("tr[data-delivery] >> text=Timeline").click()
    page.wait_for_selector("h2:text('Attempts')")
    assert "HTTP 200" in page.locator("ol.timeline").inner_text()
    shoot(page, "delivery")

    # Her receiver breaks: three orders become dead letters (404 is not retried).
    broken["yes"] = True
    for n in (1, 2, 3):
        alice.client.post("/api/v1/events", {"type": "order.paid", "data": {"n": n}}, format="json")
    wait_until(lambda: DeadLetter.objects.filter(endpoint=mine).count() == 3, timeout=30)
    page.goto(f"{base}/portal/endpoints/{mine.id}/?status=dead")
    assert page.locator("tr[data-delivery]").count() == 3
    page.click("a[href$='/dead-letters/']")
    page.wait_for_selector("h1:text('Dead letters')")
    assert page.locator("tr[data-letter]").count() == 3
    shoot(page, "dead-letters")

    # Fixed: she replays the newest, then recovers the rest since an hour ago.
    broken["yes"] = False
    newest = DeadLetter.objects.filter(endpoint=mine).order_by("-dead_at", "-id")[0]
    page.locator(f"tr[data-letter='{newest.id}'] button:text('Replay')").click()
    page.wait_for_selector("text=Replayed: its delivery is pending again")
    wait_until(lambda: Delivery.objects.get(pk=newest.delivery_id).status == "succeeded", 30)
    since = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    page.fill("input[name=since]", since)
    page.click("button:text('Recover since this time')")
    page.wait_for_selector("text=Replaying the dead letters")
    wait_until(lambda: Delivery.objects.filter(endpoint=mine, status="succeeded").count() == 4, 30)
    page.reload()
    assert page.locator("tr[data-letter].replayed").count() == 3
    shoot(page, "recovered")
    # The test event, three orders refused, the same three orders again.
    bodies = [json.loads(r.body) for r in carols.wait_for(7)]
    assert sorted(b["data"]["n"] for b in bodies[1:4]) == [1, 2, 3]  # sent concurrently
    assert sorted(b["data"]["n"] for b in bodies[4:]) == [1, 2, 3]

    page.goto(f"{base}/portal/endpoints/")
    row = page.locator(f"tr[data-endpoint='{mine.id}']").inner_text()
    assert "100 %" in row and "of 4" in row and "active" in row  # all four got through
    shoot(page, "endpoints")

    # Dave's endpoint is not there, not even by guessing its URL.
    for path in (f"/portal/endpoints/{dave_endpoint}/", f"/portal/deliveries/{dave_delivery.id}/"):
        answer = page.goto(base + path)
        assert answer.status == 404
        assert "dave-only" not in page.content() and "Dave" not in page.content()
    shoot(page, "guessed")

    # The same link opened again (in another browser) shows nothing.
    again = new_page(browser)
    again.goto(link)
    again.wait_for_selector("text=already opened")
    assert carols.url not in again.content() and "Carol's orders" not in again.content()
    shoot(again, "link-used")

    # A read-only link: everything visible, no control that changes anything.
    reader = new_page(browser)
    reader.goto(portal_link_via_http(base, alice.key, "carol", read_only=True))
    reader.wait_for_selector("h1:text('Your webhook endpoints')")
    for path in (
        "/portal/endpoints/",
        f"/portal/endpoints/{mine.id}/",
        f"/portal/endpoints/{mine.id}/dead-letters/",
        f"/portal/deliveries/{newest.delivery_id}/",
    ):
        reader.goto(base + path)
        buttons = [b.strip() for b in reader.locator("button").all_inner_texts()]
        assert set(buttons) <= {"Leave", "Filter"}, (path, buttons)
        assert reader.locator("a:text('Add endpoint'), a:text('Edit')").count() == 0
    shoot(reader, "read-only")
    assert Endpoint.objects.get(pk=mine.pk).is_active
