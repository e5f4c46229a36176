"""Ids: `prefix_` and 26 Crockford base32 characters holding the creation millisecond and
80 random bits, so that ids sort as text in the order they were made."""

from __future__ import annotations

import base64
import random
import time

from core.ids import id_at, new_id
from webhooks.models import Event

# Written out here rather than imported, so the test checks the encoding independently.
CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
RFC_4648 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
TO_RFC_4648 = str.maketrans(CROCKFORD, RFC_4648)


def _decoded(identifier: str) -> bytes:
    body = identifier.split("_", 1)[1]
    assert set(body) <= set(CROCKFORD), body
    return base64.b32decode(body.translate(TO_RFC_4648) + "======")


def _millisecond(identifier: str) -> int:
    return int.from_bytes(_decoded(identifier)[:6], "big")


def test_an_id_is_crockford_base32_of_its_millisecond_and_random_bits():
    before = int(time.time() * 1000)
    identifier = new_id("evt")
    after = int(time.time() * 1000)
    assert identifier.startswith("evt_") and len(identifier) == 4 + 26
    raw = _decoded(identifier)
    assert len(raw) == 16
    assert before <= _millisecond(identifier) <= after
    # The bit layout is base32's own: encoding the bytes again gives the same text.
    again = base64.b32encode(raw).decode().rstrip("=").translate(str.maketrans(RFC_4648, CROCKFORD))
    assert again == identifier[4:]


def test_ids_do_not_repeat():
    later = [new_id("dlv") for _ in range(10_000)]
    assert len(set(later)) == len(later)
    assert len({_decoded(i)[6:] for i in later}) == len(later)  # the random part differs


def test_ids_made_in_later_milliseconds_sort_later_as_text():
    now = int(time.time() * 1000)
    rng = random.Random(25)
    # Consecutive milliseconds from now (the low characters roll over), then milliseconds
    # spread over the whole 48-bit range (the high characters roll over).
    milliseconds = list(range(now, now + 5_000))
    milliseconds += [rng.randrange(2**48) for _ in range(5_000)]
    made = [id_at("evt", ms) for ms in milliseconds]
    rng.shuffle(made)
    in_text_order = [_millisecond(identifier) for identifier in sorted(made)]
    assert in_text_order == sorted(milliseconds)


def test_ids_made_before_the_crockford_alphabet_still_work(alice):
    # An id from the RFC 4648 alphabet (`u`, `l`, `o`, `i` are no longer made) is found.
    old = Event.objects.create(
        id="evt_aggbu7lqoiwzaz2rlbt4s6xm5q", tenant=alice.tenant, type="a.b", data={}
    )
    response = alice.client.get(f"/api/v1/events/{old.id}")
    assert response.status_code == 200 and response.json()["id"] == old.id
    assert alice.client.get(f"/api/v1/deliveries?event={old.id}").status_code == 200
