"""Delivery statuses are named through deliveries.statuses.DeliveryStatus (the model's
choices), never retyped as bare strings: a renamed or added status then has one place to
change, and a typo is a NameError instead of a filter that silently matches nothing.
Read with `ast`; SQL text may still spell a status where the planner needs the literal."""

from __future__ import annotations

import ast

from deliveries.statuses import DeliveryStatus
from tests.architecture import PACKAGES, ROOT

# The one file that spells them.
HOME = "deliveries/statuses.py"
# Same word, other meaning: (file, word) -> why it stays.
NOT_STATUSES = {
    ("deliveries/lifecycle/health.py", "succeeded"): "the reason of an endpoint.recovered event",
    ("deliveries/intake/backpressure.py", "held"): "a __slots__ name",
    ("console/services/demo_data.py", "dead"): "the SQL parameter counting dead ones",
}


def test_no_code_spells_a_delivery_status_as_a_bare_string():
    statuses = set(DeliveryStatus.values)
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            if "migrations" in path.parts or name == HOME:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=name)):
                if (
                    isinstance(node, ast.Constant)
                    and node.value in statuses
                    and (name, node.value) not in NOT_STATUSES
                ):
                    found.append(f"{name}:{node.lineno} {node.value!r}")
    assert found == [], "use DeliveryStatus (Delivery.Status) instead"
