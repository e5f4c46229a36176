"""The consumer portal embedded in a tenant's page on another site (an iframe), in headless
Chromium: the session cookie (SameSite=None; Secure) and the forms (a session-bound CSRF
token, not Django's SameSite=Lax cookie) work inside the frame; without
HOMING_PORTAL_FRAME_ANCESTORS the browser refuses to frame the portal at all."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.browser import SHOTS
from tests.factories import portal_link_via_http
from webhooks.models import Endpoint

pytestmark = pytest.mark.e2e

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


class TenantApp:
    """The tenant's own web app on another site (127.0.0.1, the portal is on localhost),
    with a page that frames whatever link it is given."""

    def __init__(self) -> None:
        self.link = ""
        app = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = (
                    "<!doctype html><title>Tenant app</title><h1>Your webhooks</h1>"
                    f'<iframe src="{app.link}" title="Webhooks" width="1200" height="700">'
                    "</iframe>"
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tenant_app() -> Iterator[TenantApp]:
    app = TenantApp()
    yield app
    app.close()


def test_the_portal_works_in_an_iframe_on_the_tenants_site_only_when_allowed(
    browser,
    live_server,
    make_actor,
    tenant_app,
    settings,
):
    base = live_server.url
    assert "//localhost:" in base  # another site than the tenant's app on 127.0.0.1
    alice = make_actor("Alice Payments")
    alice.client.post("/api/v1/events", {"type": "order.paid", "data": {}}, format="json")
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()

    # Not allowed: the browser refuses to show the portal in the frame.
    tenant_app.link = portal_link_via_http(base, alice.key, "carol")
    page.goto(tenant_app.origin)
    # Chromium replaces a frame refused by frame-ancestors with its error page.
    for _ in range(100):  # wait_for_timeout lets Playwright take in the frame's navigation
        if page.frames[1].url.startswith(("chrome-error://", "http")):
            break
        page.wait_for_timeout(100)
    assert page.frames[1].url.startswith("chrome-error://"), page.frames[1].url
    assert page.frame_locator("iframe").locator("text=Your webhook endpoints").count() == 0
    page.screenshot(path=SHOTS / "portal-frame-refused.png", full_page=True)

    # Allowed: the link opens in the frame, and a form posted from it works.
    settings.HOMING_PORTAL_FRAME_ANCESTORS = [tenant_app.origin]
    tenant_app.link = portal_link_via_http(base, alice.key, "carol")
    page.goto(tenant_app.origin)
    frame = page.frame_locator("iframe")
    frame.locator("h1:text('Your webhook endpoints')").wait_for(timeout=15_000)
    frame.locator("text=Add endpoint").first.click()
    frame.locator("input[name=url]").fill("http://127.0.0.1:9/framed")
    frame.locator("input[name=event_types][value='order.paid']").check()
    frame.locator("button:text('Add endpoint')").click()
    frame.locator("text=Endpoint created").wait_for(timeout=15_000)
    page.screenshot(path=SHOTS / "portal-framed.png", full_page=True)
    created = Endpoint.objects.get(url="http://127.0.0.1:9/framed")
    assert created.owner == "carol" and created.event_types == ["order.paid"]
