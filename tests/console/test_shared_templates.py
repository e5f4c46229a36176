"""The console and the consumer portal show a delivery and an endpoint with the same
markup (DESIGN: the portal shares the console's templates), written once in
templates/shared/: a copy of it in a page's own template would drift from the other."""

from __future__ import annotations

from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

# Markup that stands in exactly one template, the shared partial named.
SHARED = {
    '<ol class="timeline">': "shared/delivery.html",
    '<pre class="payload">': "shared/delivery.html",
    "<dt>Next attempt</dt>": "shared/delivery.html",
    "Retry now</button>": "shared/delivery.html",
    "<dt>Last sequence</dt>": "shared/endpoint_settings.html",
    "<dt>Retryable failures</dt>": "shared/endpoint_health.html",
    '<th class="num">Seq</th>': "shared/endpoint_deliveries.html",
    "endpoint-action": "shared/endpoint_action.html",
    'action="deactivate"': "shared/endpoint_toggle.html",
    "« Newest</a>": "shared/pager.html",
    '<table class="filter-results">': "shared/filter_editor.html",
    'id="filter-text"': "shared/filter_editor.html",
    "No filter: every event of its types.": "shared/endpoint_filter.html",
}
PAGES = ["console/delivery.html", "portal/delivery.html"]
ENDPOINT_PAGES = ["console/endpoint.html", "portal/endpoint.html"]


@pytest.mark.parametrize("markup, home", SHARED.items())
def test_shared_markup_is_written_once(markup, home):
    holders = sorted(
        str(path.relative_to(TEMPLATES))
        for path in TEMPLATES.rglob("*.html")
        if markup in path.read_text()
    )
    assert holders == [home]


def test_both_apps_include_the_shared_pages():
    for page in PAGES:
        assert '{% include "shared/delivery.html"' in (TEMPLATES / page).read_text(), page
    for page in ENDPOINT_PAGES:
        text = (TEMPLATES / page).read_text()
        for partial in (
            "endpoint_settings",
            "endpoint_health",
            "endpoint_deliveries",
            "endpoint_filter",
        ):
            assert f'{{% include "shared/{partial}.html"' in text, (page, partial)


def test_both_filter_editors_include_the_shared_editor():
    for page in ("console/filter.html", "portal/filter.html"):
        assert '{% include "shared/filter_editor.html"' in (TEMPLATES / page).read_text(), page
