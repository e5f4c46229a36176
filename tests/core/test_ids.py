"""Ids: `prefix_` and 26 base32 characters holding the creation millisecond and 80 random bits."""

from __future__ import annotations

import base64
import time

from core.ids import new_id


def _decoded(identifier: str) -> bytes:
    body = identifier.split("_", 1)[1]
    return base64.b32decode(body.upper() + "======")


def test_an_id_is_base32_of_its_millisecond_and_random_bits():
    before = int(time.time() * 1000)
    identifier = new_id("evt")
    after = int(time.time() * 1000)
    assert identifier.startswith("evt_") and len(identifier) == 4 + 26
    raw = _decoded(identifier)
    assert len(raw) == 16
    assert before <= int.from_bytes(raw[:6], "big") <= after
    # The encoding is base32's own: decoding and encoding again gives the same text.
    assert base64.b32encode(raw).decode().rstrip("=").lower() == identifier[4:]


def test_ids_do_not_repeat():
    later = [new_id("dlv") for _ in range(10_000)]
    assert len(set(later)) == len(later)
    assert len({_decoded(i)[6:] for i in later}) == len(later)  # the random part differs
