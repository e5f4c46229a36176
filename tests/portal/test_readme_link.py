"""The README's curl commands that make a portal link work as printed, against a real
web server, and the link they print opens the portal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from django.test import Client

from tests.processes import ROOT

pytestmark = pytest.mark.e2e


def readme_link_commands() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("# Endpoints of one customer")
    return readme[start : readme.index("```", start)]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_readme_makes_a_link_that_opens_the_portal(live_server, alice):
    ran = subprocess.run(
        ["bash", "-euc", readme_link_commands()],
        env={**os.environ, "KEY": alice.key, "API": f"{live_server.url}/api/v1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    decoder = json.JSONDecoder()
    endpoint, at = decoder.raw_decode(ran.stdout)
    link, _ = decoder.raw_decode(ran.stdout, at)
    assert endpoint["owner"] == "acme" and endpoint["url"] == "https://acme.example.com/hooks"
    assert link["url"].startswith(f"{live_server.url}/portal/#")
    browser = Client()
    opened = browser.post("/portal/session", {"link": link["url"].split("#", 1)[1]})
    assert opened.status_code == 302
    assert "acme.example.com/hooks" in browser.get("/portal/endpoints/").content.decode()
