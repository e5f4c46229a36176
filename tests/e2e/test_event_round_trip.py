"""What a producer posts is what the receiver's body carries, character for character."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def test_unicode_payloads_reach_the_receiver_unchanged(alice, homing, receiver_factory):
    receiver = receiver_factory()
    created = alice.client.post("/api/v1/endpoints", {"url": receiver.url}, format="json")
    assert created.status_code == 201
    homing("worker")
    data = {"emoji": "🚀", "cjk": "支払い", "sep": "\u2028", "big": 10**40, "ключ": "é"}
    raw = json.dumps({"type": "a.b", "data": data}, ensure_ascii=True)
    response = alice.client.post("/api/v1/events", raw, content_type="application/json")
    assert response.status_code == 202

    [request] = receiver.wait_for(1)
    text = request.body.decode("utf-8")  # valid UTF-8, no lone surrogates
    assert json.loads(text)["data"] == data
    assert "🚀" in text or "\\ud83d\\ude80" in text
