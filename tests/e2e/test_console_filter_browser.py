"""The console's filter editor in headless Chromium: Olivia (staff, may change endpoints)
opens an endpoint of alice's, writes a filter, tries it on the last events of a type and
saves it, and the next events follow it; Victor (staff without that permission) tries
but has no save control; after HOMING_ENCRYPTION_KEY changes without a rotation the
pages stay up and say the filter cannot be read. Screenshots land in
screenshots/console-filter-*.png (git-ignored) for a human look."""

from __future__ import annotations

import os

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Permission, User

from tests.browser import SHOTS, new_page
from tests.factories import endpoint_id_via_api, event_via_api

pytestmark = pytest.mark.e2e

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def log_in(browser, base: str, username: str):
    page = new_page(browser)
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "s3cret-pass")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:text('Dashboard')")
    return page


def shoot(page, name: str) -> None:
    page.screenshot(path=SHOTS / f"console-filter-{name}.png", full_page=True)


def test_staff_try_and_save_a_filter_in_the_console(browser, live_server, make_actor, settings):
    alice = make_actor("Alice Payments")
    endpoint = endpoint_id_via_api(alice, event_types=["invoice.*"], description="Alice's books")
    for amount in (5, 250, 40):
        event_via_api(alice, "invoice.paid", {"amount": amount, "currency": "EUR"})
    event_via_api(alice, "invoice.voided", {"invoice": "in_1"})
    olivia = User.objects.create_user("olivia", "o@example.com", "s3cret-pass", is_staff=True)
    olivia.user_permissions.add(Permission.objects.get(codename="change_endpoint"))
    User.objects.create_user("victor", "v@example.com", "s3cret-pass", is_staff=True)

    page = log_in(browser, live_server.url, "olivia")
    page.goto(f"{live_server.url}/endpoints/{endpoint}/")
    assert "No filter: every event of its types." in page.content()
    page.click("text=Edit and try")
    page.wait_for_url(f"**/endpoints/{endpoint}/filter")
    page.fill("#filter-text", '{"data": {"amount": {"$gte": 100}}}')
    page.select_option("select[name=event_type]", "invoice.paid")
    page.click("button[value=try]")
    results = page.locator("table.filter-results")
    results.wait_for()
    assert "1 of 3 recent" in page.content()
    assert "filter.data.amount.$gte: 40 is not ≥ 100" in results.inner_text()
    shoot(page, "tried")

    page.fill("#filter-text", '{"data": {"amount": {"$gte": true}}}')
    page.click("button[value=save]")
    page.wait_for_selector("p.msg.error")
    assert "filter.data.amount.$gte: expected a number or a string" in page.content()
    shoot(page, "invalid")

    page.fill("#filter-text", '{"data": {"amount": {"$gte": 100}}}')
    page.click("button[value=save]")
    page.wait_for_url(f"**/endpoints/{endpoint}/")
    assert "Filter saved." in page.content()
    assert "$gte" in page.locator("pre.payload").first.inner_text()
    shoot(page, "saved")
    assert event_via_api(alice, "invoice.paid", {"amount": 1})["deliveries"] == []
    assert len(event_via_api(alice, "invoice.paid", {"amount": 999})["deliveries"]) == 1

    watcher = log_in(browser, live_server.url, "victor")
    watcher.goto(f"{live_server.url}/endpoints/{endpoint}/")
    editor_link = watcher.locator(f"a[href='/endpoints/{endpoint}/filter']")
    assert editor_link.inner_text().startswith("Try ")  # not "Edit and try"
    editor_link.click()
    watcher.click("button[value=try]")
    watcher.locator("table.filter-results").wait_for()
    assert watcher.locator("button[value=save]").count() == 0
    shoot(watcher, "read-only")

    # HOMING_ENCRYPTION_KEY changed without a rotation: the filter's key is gone.
    settings.HOMING_ENCRYPTION_KEY = [Fernet.generate_key().decode()]
    page.goto(f"{live_server.url}/endpoints/{endpoint}/")
    assert "The filter cannot be read" in page.locator("p.filter-unreadable").inner_text()
    shoot(page, "unreadable")
    page.click("text=Edit and try")
    assert page.locator("p.filter-unreadable").is_visible()
    page.fill("#filter-text", '{"data": {"currency": "EUR"}}')
    page.click("button[value=save]")
    page.wait_for_url(f"**/endpoints/{endpoint}/")
    assert page.locator("p.filter-unreadable").count() == 0
    assert "EUR" in page.locator("pre.payload").first.inner_text()
