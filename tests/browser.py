"""Headless Chromium for the browser tests (Playwright driving Debian's chromium).

The `browser` fixture in tests/e2e/conftest.py opens it; full-page screenshots go to
SHOTS (git-ignored) for a human look.
"""

from __future__ import annotations

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
