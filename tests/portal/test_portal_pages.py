"""The consumer portal through Django's test client: Alice (a tenant) makes links for her
customers Carol and Dave; Carol's browser must never show or touch Dave's endpoints."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from deliveries.lifecycle.endpoint_backlogs import endpoint_backlog_clear
from deliveries.models import Delivery
from dlq.models import DeadLetter, ReplayJob
from portal.models import PortalSession
from portal.services.sessions import (
    PortalLinkRefused,
    portal_session_create,
    portal_session_exchange,
)
from tests.factories import (
    dead_letter_of,
    portal_csrf_of,
    portal_link_via_api,
    portal_session_via_link,
)
from webhooks.models import Endpoint

URL = "http://127.0.0.1:9/hooks"


@pytest.fixture
def shop(alice):
    """Carol's and Dave's endpoints, each with one delivery of order.paid."""
    ids = {}
    for owner in ("carol", "dave"):
        ids[owner] = alice.client.post(
            "/api/v1/endpoints", {"url": URL, "owner": owner}, format="json"
        ).json()["id"]
    alice.client.post("/api/v1/events", {"type": "order.paid", "data": {"n": 1}}, format="json")
    return ids


@pytest.fixture
def carol(alice, shop):
    browser, answer = portal_session_via_link(portal_link_via_api(alice, "carol"))
    assert answer.status_code == 302
    return browser


def test_a_link_is_made_for_an_owner_with_its_secret_in_the_fragment(alice):
    response = alice.client.post(
        "/api/v1/portal-sessions", {"owner": "carol", "ttl": "2h"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"http://testserver/portal/#[A-Za-z0-9_-]{40,}", body["url"])
    session = PortalSession.objects.get()
    assert body["url"].split("#")[1] not in (session.link_hash, session.cookie_hash)
    assert timedelta(minutes=119) < session.expires_at - timezone.now() <= timedelta(hours=2)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"owner": "carol", "ttl": "8d"}, "ttl"),
        ({"owner": "carol", "ttl": "soon"}, "ttl"),
        ({"owner": "carol", "ttl": "99999999999999999999d"}, "ttl"),  # was a 500 (overflow)
        ({"owner": "carol", "ttl": "9" * 400}, "ttl"),  # an infinite float
        ({"owner": "carol", "ttl": 10**30}, "ttl"),
        ({}, "owner"),
        ({"owner": ""}, "owner"),
    ],
)
def test_a_bad_link_request_is_a_400_naming_the_field(alice, body, field):
    response = alice.client.post("/api/v1/portal-sessions", body, format="json")
    assert response.status_code == 400 and field in response.json()["errors"], response.content


def test_opening_a_link_gives_an_httponly_samesite_cookie_until_it_expires(alice, shop):
    browser, answer = portal_session_via_link(portal_link_via_api(alice, "carol"))
    assert answer.status_code == 302 and answer["Location"] == "/portal/endpoints/"
    cookie = answer.cookies["homing_portal"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and cookie["path"] == "/portal/"
    assert 3500 < int(cookie["max-age"]) <= 3600
    page = browser.get("/portal/endpoints/")
    assert page.status_code == 200 and URL in page.content.decode()


def test_a_link_works_once(alice, shop):
    url = portal_link_via_api(alice, "carol")
    portal_session_via_link(url)
    browser, again = portal_session_via_link(url)
    assert again.status_code == 403 and "homing_portal" not in again.cookies
    assert "already opened" in again.content.decode()
    assert browser.get("/portal/endpoints/").status_code == 403


def test_an_expired_or_tampered_link_shows_no_data(alice, shop):
    url = portal_link_via_api(alice, "carol")
    PortalSession.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    _, expired = portal_session_via_link(url)
    assert expired.status_code == 403 and "expired" in expired.content.decode()
    _, tampered = portal_session_via_link(portal_link_via_api(alice, "carol")[:-2] + "xx")
    assert tampered.status_code == 403 and "not valid" in tampered.content.decode()
    for answer in (expired, tampered):
        assert URL not in answer.content.decode() and "homing_portal" not in answer.cookies


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_SEC_FETCH_SITE": "cross-site"},
        {"HTTP_SEC_FETCH_SITE": "same-site"},  # a sibling subdomain is another origin
        {"HTTP_ORIGIN": "https://evil.example"},
        {"HTTP_ORIGIN": "null"},
        {"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_ORIGIN": "http://testserver"},
    ],
)
def test_a_link_posted_from_another_site_opens_no_session(alice, shop, headers):
    # Login CSRF: Mallory's page posts her own link so that Carol's browser ends up in
    # Mallory's portal. Refused before the link is spent.
    url = portal_link_via_api(alice, "mallory")
    token = url.split("#", 1)[1]
    browser = Client()
    forged = browser.post("/portal/session", {"link": token}, **headers)
    assert forged.status_code == 403 and "homing_portal" not in forged.cookies
    assert "another site" in forged.content.decode()
    assert browser.get("/portal/endpoints/").status_code == 403
    _, own = portal_session_via_link(url)  # the link itself still works, from the portal's own page
    assert own.status_code == 302


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_SEC_FETCH_SITE": "same-origin", "HTTP_ORIGIN": "http://testserver"},
        {"HTTP_ORIGIN": "http://testserver"},  # a browser without Sec-Fetch-Site
        {},  # neither (a browser before 2020): let through, as Django's CSRF check does
    ],
)
def test_a_link_posted_by_the_portals_own_page_opens_a_session(alice, shop, headers):
    token = portal_link_via_api(alice, "carol").split("#", 1)[1]
    browser = Client()
    answer = browser.post("/portal/session", {"link": token}, **headers)
    assert answer.status_code == 302 and "homing_portal" in answer.cookies
    assert browser.get("/portal/endpoints/").status_code == 200


def test_without_a_session_every_page_says_so(shop):
    anonymous = Client()
    for path in ("/portal/endpoints/", f"/portal/endpoints/{shop['carol']}/"):
        page = anonymous.get(path)
        assert page.status_code == 403 and "no portal session" in page.content.decode()
        assert URL not in page.content.decode()
    forged = Client()
    forged.cookies["homing_portal"] = "guess"
    assert forged.get("/portal/endpoints/").status_code == 403


def test_a_session_expires_with_its_link(carol):
    PortalSession.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert carol.get("/portal/endpoints/").status_code == 403


def test_carol_sees_her_endpoint_and_not_daves(carol, shop):
    listing = carol.get("/portal/endpoints/").content.decode()
    assert shop["carol"] in listing and shop["dave"] not in listing
    daves = Delivery.objects.get(endpoint_id=shop["dave"])
    for path in (
        f"/portal/endpoints/{shop['dave']}/",
        f"/portal/endpoints/{shop['dave']}/edit",
        f"/portal/endpoints/{shop['dave']}/dead-letters/",
        f"/portal/deliveries/{daves.id}/",
    ):
        assert carol.get(path).status_code == 404, path


def test_carol_cannot_change_daves_objects(carol, shop):
    token = portal_csrf_of(carol.get("/portal/endpoints/"))
    daves = Delivery.objects.get(endpoint_id=shop["dave"])
    letter = dead_letter_of(daves, "test: dead")
    posts = [
        (f"/portal/endpoints/{shop['dave']}/action", {"action": "delete"}),
        (f"/portal/endpoints/{shop['dave']}/action", {"action": "reveal"}),
        (f"/portal/endpoints/{shop['dave']}/edit", {"url": URL + "/pwned"}),
        (f"/portal/endpoints/{shop['dave']}/recover", {"since": "2020-01-01T00:00"}),
        (f"/portal/deliveries/{daves.id}/retry", {}),
        (f"/portal/dead-letters/{letter.id}/replay", {}),
    ]
    for path, body in posts:
        assert carol.post(path, {**body, "portal_csrf": token}).status_code == 404, path
    assert Endpoint.objects.get(pk=shop["dave"]).url == URL
    assert DeadLetter.objects.get(pk=letter.pk).replayed_at is None


def test_a_post_without_the_sessions_token_changes_nothing(carol, shop):
    answer = carol.post(f"/portal/endpoints/{shop['carol']}/action", {"action": "delete"})
    assert answer.status_code == 403
    assert Endpoint.objects.filter(pk=shop["carol"]).exists()


def test_carol_adds_an_endpoint_that_is_hers(carol, alice):
    page = carol.get("/portal/endpoints/new")
    assert 'value="order.paid"' in page.content.decode()  # a type Alice has sent
    answer = carol.post(
        "/portal/endpoints/new",
        {
            "url": "http://127.0.0.1:9/new",
            "description": "Orders",
            "event_types": ["order.paid"],
            "rate_limit": "5",
            "portal_csrf": portal_csrf_of(page),
        },
    )
    assert answer.status_code == 302
    created = Endpoint.objects.get(url="http://127.0.0.1:9/new")
    assert created.owner == "carol" and created.event_types == ["order.paid"]
    assert created.rate_limit == 5 and created.tenant_id == alice.tenant.pk


def test_a_refused_url_is_shown_on_the_form(carol, settings):
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = False
    page = carol.get("/portal/endpoints/new")
    answer = carol.post(
        "/portal/endpoints/new", {"url": "http://127.0.0.1/x", "portal_csrf": portal_csrf_of(page)}
    )
    assert answer.status_code == 200 and "private" in answer.content.decode()
    assert not Endpoint.objects.filter(url="http://127.0.0.1/x").exists()


def test_carol_runs_every_action_on_her_endpoint(carol, shop):
    path = f"/portal/endpoints/{shop['carol']}/"
    token = portal_csrf_of(carol.get(path))
    action = f"{path}action"
    tested = carol.post(action, {"action": "test", "portal_csrf": token})
    assert tested.status_code == 302
    assert Delivery.objects.filter(endpoint_id=shop["carol"], event__type="homing.test").exists()
    revealed = carol.post(action, {"action": "reveal", "portal_csrf": token})
    assert re.search(r"whsec_[A-Za-z0-9+/=]+", revealed.content.decode())
    assert revealed["Cache-Control"] == "no-store"
    old = _secret_in(revealed.content.decode())
    rotated = carol.post(action, {"action": "rotate", "portal_csrf": token})
    assert _secret_in(rotated.content.decode()) != old
    carol.post(action, {"action": "deactivate", "portal_csrf": token})
    endpoint_backlog_clear(endpoint_id=shop["carol"])  # the job the deactivation started
    assert not Endpoint.objects.get(pk=shop["carol"]).is_active
    assert DeadLetter.objects.filter(endpoint_id=shop["carol"]).count() == 2
    carol.post(action, {"action": "activate", "portal_csrf": token})
    letters = carol.get(f"{path}dead-letters/").content.decode()
    assert letters.count('name="portal_csrf"') >= 3  # leave, recover, one replay per row
    letter = DeadLetter.objects.filter(endpoint_id=shop["carol"])[0]
    carol.post(f"/portal/dead-letters/{letter.id}/replay", {"portal_csrf": token})
    assert DeadLetter.objects.get(pk=letter.pk).replayed_at is not None
    since = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    recovered = carol.post(f"{path}recover", {"since": since, "portal_csrf": token})
    assert recovered.status_code == 302 and ReplayJob.objects.get().total == 1
    deleted = carol.post(action, {"action": "delete", "portal_csrf": token})
    assert deleted.status_code == 302 and not Endpoint.objects.filter(pk=shop["carol"]).exists()


def test_deliveries_filter_by_status_and_type(carol, shop, alice):
    token = portal_csrf_of(carol.get("/portal/endpoints/"))
    carol.post(
        f"/portal/endpoints/{shop['carol']}/action", {"action": "test", "portal_csrf": token}
    )
    path = f"/portal/endpoints/{shop['carol']}/"
    only_tests = carol.get(path, {"event_type": "homing.test"}).content.decode()
    assert only_tests.count("data-delivery=") == 1 and "<code>homing.test</code>" in only_tests
    both = carol.get(path).content.decode()
    assert both.count("data-delivery=") == 2
    dead = carol.get(path, {"status": "dead"}).content.decode()
    assert dead.count("data-delivery=") == 0


def test_a_delivery_page_shows_payload_and_retry(carol, shop):
    mine = Delivery.objects.get(endpoint_id=shop["carol"])
    page = carol.get(f"/portal/deliveries/{mine.id}/").content.decode()
    assert "&quot;n&quot;: 1" in page and "Retry now" in page
    retried = carol.post(f"/portal/deliveries/{mine.id}/retry", {"portal_csrf": csrf_of_page(page)})
    assert retried.status_code == 302


def csrf_of_page(text: str) -> str:
    found = re.search(r'name="portal_csrf" value="([0-9a-f]+)"', text)
    assert found, "the page has no portal_csrf field"
    return found[1]


def _secret_in(text: str) -> str:
    found = re.search(r"whsec_[A-Za-z0-9+/=]+", text)
    assert found, "the page shows no secret"
    return found[0]


def test_a_read_only_session_shows_no_control_and_refuses_changes(alice, shop):
    browser, _ = portal_session_via_link(portal_link_via_api(alice, "carol", read_only=True))
    mine = Delivery.objects.get(endpoint_id=shop["carol"])
    dead_letter_of(mine, "test: dead")
    for path in (
        "/portal/endpoints/",
        f"/portal/endpoints/{shop['carol']}/",
        f"/portal/endpoints/{shop['carol']}/dead-letters/",
        f"/portal/deliveries/{mine.id}/",
    ):
        page = browser.get(path).content.decode()
        # The one form left is "Leave" (ending one's own session).
        assert page.count("<form") - page.count('method="get"') == 1, path
        assert "Retry now" not in page and "Replay" not in page and "Add endpoint" not in page
    token = portal_csrf_of(browser.get("/portal/endpoints/"))
    assert browser.get("/portal/endpoints/new").status_code == 403
    for action in ("delete", "deactivate", "rotate", "reveal", "test"):
        answer = browser.post(
            f"/portal/endpoints/{shop['carol']}/action", {"action": action, "portal_csrf": token}
        )
        assert answer.status_code == 403, action
    assert (
        browser.post(f"/portal/deliveries/{mine.id}/retry", {"portal_csrf": token}).status_code
        == 403
    )
    endpoint = Endpoint.objects.get(pk=shop["carol"])
    assert endpoint.is_active and not Delivery.objects.filter(event__type="homing.test").exists()


def test_the_portal_is_not_frameable_unless_configured(carol, settings):
    page = carol.get("/portal/endpoints/")
    assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
    assert "script-src 'self'" in page["Content-Security-Policy"]
    assert page["X-Frame-Options"] == "DENY"
    settings.HOMING_PORTAL_FRAME_ANCESTORS = ["https://app.example.com"]
    framed = carol.get("/portal/endpoints/")
    assert "frame-ancestors https://app.example.com;" in framed["Content-Security-Policy"]
    assert "X-Frame-Options" not in framed


def test_embedded_the_cookie_is_samesite_none_secure_and_partitioned(alice, shop, settings):
    settings.HOMING_PORTAL_FRAME_ANCESTORS = ["https://app.example.com"]
    _, answer = portal_session_via_link(portal_link_via_api(alice, "carol"))
    cookie = answer["Set-Cookie"]
    assert re.fullmatch(
        r"homing_portal=[A-Za-z0-9_-]{43}; Max-Age=3[0-9]{3}; Path=/portal/; HttpOnly; "
        r"Secure; SameSite=None; Partitioned",
        cookie,
    )


def test_leaving_ends_the_session(carol):
    token = portal_csrf_of(carol.get("/portal/endpoints/"))
    assert carol.post("/portal/logout", {"portal_csrf": token}).status_code == 200
    assert carol.get("/portal/endpoints/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_of_concurrent_openings_of_one_link_one_gets_a_session(make_actor):
    """Two tabs (or a prefetching proxy and the user) open the link at once: one session."""
    alice = make_actor("Alice Payments")
    _, token = portal_session_create(tenant=alice.tenant, owner="carol")
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def open_it() -> None:
        start.wait()
        try:
            portal_session_exchange(link_token=token)
            outcomes.append("session")
        except PortalLinkRefused as refused:
            outcomes.append(refused.reason)
        finally:
            connection.close()

    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["session"] + ["used"] * 7


def test_an_endpoints_deliveries_page_newest_first_each_once(carol, shop, alice):
    for n in range(30):
        alice.client.post("/api/v1/events", {"type": "order.paid", "data": {"n": n}}, format="json")
    path = f"/portal/endpoints/{shop['carol']}/"
    seen: list[str] = []
    page = carol.get(path).content.decode()
    while True:
        seen += re.findall(r'data-delivery="(dlv_[a-z0-9]+)"', page)
        older = re.search(r'href="\?(after=[^"]+)">Older', page)
        if older is None:
            break
        page = carol.get(f"{path}?{older[1].replace('&amp;', '&')}").content.decode()
    mine = Delivery.objects.filter(endpoint_id=shop["carol"]).order_by("-created_at", "-id")
    assert seen == [d.id for d in mine] and len(seen) == 31


def test_making_a_link_deletes_sessions_expired_a_day_ago(alice):
    portal_link_via_api(alice, "carol")
    portal_link_via_api(alice, "carol")
    long_ago, recently = PortalSession.objects.order_by("created_at")
    PortalSession.objects.filter(pk=long_ago.pk).update(
        expires_at=timezone.now() - timedelta(days=1, minutes=1)
    )
    PortalSession.objects.filter(pk=recently.pk).update(
        expires_at=timezone.now() - timedelta(hours=1)
    )
    portal_link_via_api(alice, "dave")
    assert not PortalSession.objects.filter(pk=long_ago.pk).exists()
    assert PortalSession.objects.filter(pk=recently.pk).exists()  # says "expired" if opened
    assert PortalSession.objects.count() == 2
