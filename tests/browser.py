"""Headless Chromium for the browser tests (Playwright driving Debian's chromium).

The `browser` fixture in tests/e2e/conftest.py opens it; full-page screenshots go to
SHOTS (git-ignored) for a human look.
"""

from __future__ import annotations

from typing import Any

from tests.processes import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = ROOT / "screenshots"


def new_page(browser: Any) -> Any:
    """A page in a fresh context, answering our confirmation dialogs with yes."""
    page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    return page


def shoot(page: Any, name: str) -> None:
    """A full-page screenshot in SHOTS, named `portal-<name>.png`."""
    page.screenshot(path=SHOTS / f"portal-{name}.png", full_page=True)
