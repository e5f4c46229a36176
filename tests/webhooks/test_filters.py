"""The filter syntax against its shared vectors (filter_vectors.json), and its limits."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from core.exceptions import InvalidInput
from webhooks.filters import (
    OPERATORS,
    event_document,
    filter_check,
    filter_compile,
    filter_explain,
)

VECTORS = json.loads((Path(__file__).parent / "filter_vectors.json").read_text())


def _document(named_or_inline: str | dict) -> dict:
    event = (
        VECTORS["events"][named_or_inline] if isinstance(named_or_inline, str) else named_or_inline
    )
    return event_document(event["type"], event["data"], event.get("ordering_key"))


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_the_vector_matches_as_documented(case):
    document = _document(case["event"])
    assert filter_compile(case["filter"])(document) is case["matches"]
    # The explanation is built by the same compiler: it never disagrees with routing.
    matches, explanation = filter_explain(case["filter"], document)
    assert matches is case["matches"] and explanation


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=[c["path"] for c in VECTORS["invalid"]])
def test_an_invalid_filter_is_refused_naming_its_path(case):
    with pytest.raises(InvalidInput) as refused:
        filter_check(case["filter"])
    assert refused.value.field == case["path"]


def test_there_are_at_least_150_vectors_over_every_operator():
    assert len(VECTORS["cases"]) >= 150
    text = json.dumps([case["filter"] for case in VECTORS["cases"]])
    for operator in OPERATORS:
        assert f'"{operator}"' in text, operator


def test_a_filter_over_4_kib_is_refused():
    big = {"data": {"note": {"$in": ["x" * 100] * 40}}}
    with pytest.raises(InvalidInput, match="at most 4096 bytes") as refused:
        filter_check(big)
    assert refused.value.field == "filter"
    filter_check({"data": {"note": {"$in": ["x" * 100] * 38}}})  # 3.9 KiB: fine


def test_the_size_counts_utf8_bytes_of_compact_json():
    # 1,400 characters of 3 bytes each: 4,200 bytes although fewer than 4,096 characters.
    with pytest.raises(InvalidInput, match="at most 4096 bytes"):
        filter_check({"data": {"name": "€" * 1400}})


def test_the_explanation_names_the_failing_clause():
    document = _document("order")
    matches, explanation = filter_explain(
        {"type": "order.paid", "data": {"amount": {"$gte": 200}}}, document
    )
    assert (matches, explanation) == (False, "filter.data.amount.$gte: 150 is not ≥ 200")
    # An $or names every alternative that failed; a branch that matched names nothing.
    either = {"$or": [{"type": "a"}, {"data": {"currency": "USD"}}]}
    _, explanation = filter_explain(either, document)
    assert explanation == 'filter.$or[0].type: "order.paid" is not "a"; ' + (
        'filter.$or[1].data.currency: "EUR" is not "USD"'
    )
    _, explanation = filter_explain(
        {"data": {"items": {"sku": "B-2"}, "currency": {"$exist": False}}}, document
    )
    assert explanation == "filter.data.currency.$exist: present"


def test_a_filter_evaluates_in_microseconds_on_a_2_kb_event():
    data = {
        "amount": 120,
        "currency": "EUR",
        "customer": {"id": "cus_123", "tier": "gold", "country": "DE"},
        "items": [{"sku": f"S{n}", "qty": n, "name": "x" * 30} for n in range(20)],
        "note": "y" * 550,
    }
    assert 1900 <= len(json.dumps(data)) <= 2200
    document = event_document("order.paid", data, None)
    predicate = filter_compile(
        {
            "type": {"$in": ["order.paid", "order.refunded"]},
            "data": {
                "amount": {"$gte": 100, "$lt": 1000},
                "customer": {"tier": {"$in": ["gold", "platinum"]}, "country": {"$nin": ["US"]}},
                "items": {"sku": "S19"},
            },
        }
    )
    assert predicate(document)
    runs = []
    for _ in range(30):
        start = time.perf_counter()
        for _ in range(200):
            predicate(document)
        runs.append((time.perf_counter() - start) / 200)
    # ~11 µs measured (the target is 20: `python -m bench.filters` measures it). Here only a
    # wide bound, which a busy shared machine cannot break: an interpreter re-reading the
    # filter's JSON per event would take several times as long.
    assert statistics.median(runs) < 100e-6, f"{statistics.median(runs) * 1e6:.1f} µs"


def test_sixteen_levels_are_allowed_and_seventeen_refused():
    sixteen: dict = {"x": 1}
    for _ in range(14):  # with the top level and `data`: 16 objects
        sixteen = {"x": sixteen}
    filter_check({"data": sixteen})
    with pytest.raises(InvalidInput, match="deeper than 16 levels"):
        filter_check({"data": {"x": sixteen}})
