"""Routing by clauses (fan_out.py) decides as the whole filters do: on every shared vector
alone, and with all of them at once as one tenant's endpoints sharing paths and clauses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deliveries.intake.fan_out import MATCHES_NOTHING, compiled_filter, fan_out_build
from webhooks.filters import event_document
from webhooks.services.event_input import EventInput

VECTORS = json.loads((Path(__file__).parents[2] / "webhooks" / "filter_vectors.json").read_text())


def _input_of(named_or_inline: str | dict) -> EventInput:
    event = (
        VECTORS["events"][named_or_inline] if isinstance(named_or_inline, str) else named_or_inline
    )
    return EventInput(
        type=event["type"], data=event["data"], ordering_key=event.get("ordering_key")
    )


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_one_filter_routes_as_its_vector_says(case):
    item = _input_of(case["event"])
    fan_out = fan_out_build(item.type, [("ep_1", compiled_filter(case["filter"]))])
    assert list(fan_out.endpoint_ids(item)) == (["ep_1"] if case["matches"] else [])


def test_every_vector_filter_at_once_routes_as_each_alone():
    # One tenant with an endpoint per vector filter (and two without any): equal paths and
    # clauses are shared between them, and each endpoint still gets exactly its answer.
    compiled = [
        (f"ep_{n:03}", compiled_filter(c["filter"])) for n, c in enumerate(VECTORS["cases"])
    ]
    endpoints = [("ep_first", None), *compiled, ("ep_last", None)]
    events = [*VECTORS["events"].values(), *(c["event"] for c in VECTORS["cases"])]
    for event in events:
        item = _input_of(event)
        document = event_document(item.type, item.data, item.ordering_key)
        expected = ["ep_first"]
        expected += [pk for pk, f in compiled if f.whole(document)]
        expected.append("ep_last")
        fan_out = fan_out_build(item.type, endpoints)
        assert list(fan_out.endpoint_ids(item)) == expected, event


def test_type_clauses_are_answered_when_the_fan_out_is_built():
    paid = compiled_filter({"type": "order.paid", "data": {"amount": {"$gte": 100}}})
    refunded = compiled_filter({"type": {"$startsWith": "order.ref"}})
    fan_out = fan_out_build("order.paid", [("ep_paid", paid), ("ep_refunded", refunded)])
    assert fan_out.ids == ("ep_paid",)  # refunded can never take order.paid
    assert len(fan_out.asks) == 1  # only data.amount is left to ask per event
    big = EventInput(type="order.paid", data={"amount": 150})
    small = EventInput(type="order.paid", data={"amount": 50})
    assert list(fan_out.endpoint_ids(big)) == ["ep_paid"]
    assert list(fan_out.endpoint_ids(small)) == []


def test_a_list_where_the_filter_has_an_object_asks_the_whole_filter():
    # Both fields must hold in one element: clause by clause, each holds in some element.
    spec = {"data": {"items": {"sku": "A", "qty": 2}}}
    fan_out = fan_out_build("t", [("ep_1", compiled_filter(spec))])
    apart = EventInput(type="t", data={"items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]})
    together = EventInput(type="t", data={"items": [{"sku": "B"}, {"sku": "A", "qty": 2}]})
    assert list(fan_out.endpoint_ids(apart)) == []
    assert list(fan_out.endpoint_ids(together)) == ["ep_1"]


def test_a_filter_that_does_not_compile_takes_nothing():
    fan_out = fan_out_build("t", [("ep_1", MATCHES_NOTHING), ("ep_2", None)])
    assert list(fan_out.endpoint_ids(EventInput(type="t", data={}))) == ["ep_2"]
