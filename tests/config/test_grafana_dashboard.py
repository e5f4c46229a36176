"""docs/grafana-dashboard.json asks Prometheus only for what Homing's /metrics exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.test import Client

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
# The PromQL the dashboard may use besides metric names.
PROMQL = {"sum", "max", "rate", "histogram_quantile", "by"}


def _metric_names(expr: str) -> set[str]:
    expr = re.sub(r"by \([^)]*\)", "", expr)  # grouping labels
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)  # label matchers, ranges
    return {token for token in re.findall(r"[A-Za-z_:][\w:]*", expr)} - PROMQL


def test_the_dashboard_uses_only_homings_own_metrics(db) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exposed = set()
    for line in Client().get("/metrics").content.decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            suffixes = ("_bucket", "_sum", "_count") if kind == "histogram" else ("",)
            exposed |= {name + suffix for suffix in suffixes}
    used = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            used |= _metric_names(target["expr"])
    assert used, "the dashboard queries nothing"
    assert used <= exposed, used - exposed
    assert {"homing_attempt_duration_seconds_bucket", "homing_delivery_lag_seconds"} <= used
