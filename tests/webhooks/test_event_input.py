"""Every event body that cannot be stored and re-sent faithfully is a 400, nothing written."""

from __future__ import annotations

import json

import pytest

from deliveries.models import Delivery
from tests.factories import endpoint_via_api
from webhooks.models import Event


def raw_post(actor, raw: str | bytes):
    return actor.client.post("/api/v1/events", raw, content_type="application/json")


def deep(levels: int) -> str:
    """A body nested `levels` deep, counting the body itself as the first level."""
    return '{"type": "a.b", "data": ' + '{"k": ' * (levels - 2) + "{}" + "}" * (levels - 2) + "}"


@pytest.fixture
def endpoint(alice):
    endpoint_via_api(alice)


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        (deep(65), "body", "deeper than 64"),
        ('{"type": "a.b", "data": ' + "[" * 5000 + "]" * 5000 + "}", "body", "deeper than 64"),
        ('{"type": "a.b", "data": {"x": NaN}}', "body", "NaN"),
        ('{"type": "a.b", "data": {"x": Infinity}}', "body", "Infinity"),
        ('{"type": "a.b", "data": {"x": -Infinity}}', "body", "-Infinity"),
        ('{"type": "a.b", "data": {"x": 1e999}}', "body", "too large"),
        ('{"type": "a.b", "data": {"x": "a\\u0000b"}}', "body", "NUL"),
        ('{"type": "a.b", "data": {"a\\u0000": 1}}', "body", "NUL"),
        ('{"type": "a.b", "data": {"x": "\\ud800"}}', "body", "surrogate"),
        ('{"type": "a.b", "data": {"\\udfff": [1]}}', "body", "surrogate"),
        ('{"type": "a.b", "data": {"x": ' + "9" * 4301 + "}}", "body", "4300 digits"),
        ('{"type": "a.b", "data": {"x": -' + "9" * 4301 + "}}", "body", "4300 digits"),
        ('{"type": "a.b\\n", "data": {}}', "type", "letters"),
        ('{"type": "a b", "data": {}}', "type", "letters"),
        ('{"type": "a/b", "data": {}}', "type", "letters"),
        ('{"type": "", "data": {}}', "type", "letters"),
        (json.dumps({"type": "x" * 256, "data": {}}), "type", "letters"),
        (json.dumps({"type": "é", "data": {}}), "type", "letters"),
        (json.dumps({"type": 5, "data": {}}), "type", "letters"),
        (json.dumps({"type": "homing.test", "data": {}}), "type", "homing."),
        (json.dumps({"type": "a.b", "data": "text"}), "data", "object"),
        (json.dumps({"type": "a.b", "data": None}), "data", "object"),
        (json.dumps({"data": {}}), "type", "required"),
        (b'{"type": "a.b", "data": {"x": "\xff"}}', "body", "UTF-8"),
        ("", "body", "JSON"),
    ],
)
def test_it_refuses_unstorable_events_naming_the_field(alice, endpoint, raw, field, needle):
    response = raw_post(alice, raw)
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body["errors"] and needle in body["message"]
    assert Event.objects.count() == 0 and Delivery.objects.count() == 0


def test_it_accepts_64_levels_and_a_4300_digit_integer(alice, endpoint):
    assert raw_post(alice, deep(64)).status_code == 202
    big = int("9" * 4300)
    response = raw_post(alice, json.dumps({"type": "a.b", "data": {"n": big}}))
    assert response.status_code == 202
    assert Event.objects.get(pk=response.json()["id"]).data == {"n": big}


def test_it_takes_every_allowed_type_character(alice, endpoint):
    event_type = "Az09_.:-" + "x" * 247
    response = raw_post(alice, json.dumps({"type": event_type, "data": {}}))
    assert response.status_code == 202 and response.json()["type"] == event_type


def test_unicode_round_trips_to_the_stored_event_and_the_answer(alice, endpoint):
    data = {
        "emoji": "🚀💳",
        "cjk": "支払い完了",
        "escaped": '\u2028\u2029\t"\\/',
        "pair": "😀",  # sent as the escaped surrogate pair \ud83d\ude00: one valid character
        "ключ": ["ü", 1.5, -0.0, 10**30, True, None],
    }
    raw = json.dumps({"type": "a.b", "data": data}, ensure_ascii=True)
    response = raw_post(alice, raw)
    assert response.status_code == 202, response.content
    assert response.json()["data"] == data
    event_id = response.json()["id"]
    assert alice.client.get(f"/api/v1/events/{event_id}").json()["data"] == data


@pytest.mark.parametrize("nest", [('{"k": ', "}"), ("[", "]")])
def test_a_batch_refuses_an_item_nested_too_deep_without_any_escape(alice, nest):
    opening, closing = nest
    fine = '{"type": "a.b", "data": {"n": [1, {"m": 2}]}}'
    too_deep = '{"type": "a.b", "data": {"k": ' + opening * 63 + "1" + closing * 63 + "}}"
    body = '{"events": [' + ", ".join([fine] * 50 + [too_deep]) + "]}"
    response = alice.client.post("/api/v1/events/batch", body, content_type="application/json")
    assert response.status_code == 400
    assert "deeper than 64" in response.json()["message"]
    assert Event.objects.count() == 0
    body = '{"events": [' + ", ".join([fine] * 200) + "]}"
    response = alice.client.post("/api/v1/events/batch", body, content_type="application/json")
    assert response.status_code == 202
