"""Opaque, prefixed, time-ordered ids (`evt_01jd…`).

The leading 48-bit millisecond timestamp keeps new rows at the right edge of the primary
key index (cheap inserts) and makes ids made in different milliseconds sort by creation
time as plain text (`ORDER BY id`, `sorted()`); 80 random bits make them unguessable.
Ids made in the same millisecond sort among themselves at random.

The alphabet is Crockford's base32 in lower case: digits first, then letters, so text
order is numeric order. Ids made before it (RFC 4648's `a-z2-7`, where `z` sorted after
`2`) are still valid: nothing decodes an id, and every check only asks for
`[A-Za-z0-9_]` of at most `ID_LENGTH` characters. They sort after the new ones.
"""

from __future__ import annotations

import functools
import os
import time

from django.db import models

ID_LENGTH = 32  # longest prefix (4) + "_" + 26 base32 characters, with room to spare
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford's base32 (no i, l, o, u), lower case
# Two characters for every 10 bits: 13 lookups an id (base64.b32encode took twice as
# long, a tenth of the web process's CPU for a batch of events).
_PAIRS = [first + second for first in ALPHABET for second in ALPHABET]
_SHIFTS = range(120, -1, -10)


def new_id(prefix: str) -> str:
    """`prefix_` and 26 base32 characters of the current millisecond and 80 random bits."""
    return id_at(prefix, int(time.time() * 1000))


def id_at(prefix: str, millisecond: int) -> str:
    """`prefix_` and the 128 bits (48 of `millisecond`, 80 random) in base32, unpadded:
    the two bits past the end are zeros, as base32 pads them."""
    bits = (millisecond << 82) | (int.from_bytes(os.urandom(10), "big") << 2)
    return f"{prefix}_{''.join([_PAIRS[(bits >> shift) & 1023] for shift in _SHIFTS])}"


def id_floor(prefix: str, millisecond: int) -> str:
    """The smallest id made at `millisecond` (its random bits all zero): every id made at
    or after it sorts at or after this one, every id made before it sorts before. A
    bound of a time range of ids (the partitions of history, lifecycle/partitions.py)."""
    bits = millisecond << 82
    return f"{prefix}_{''.join([_PAIRS[(bits >> shift) & 1023] for shift in _SHIFTS])}"


def id_millisecond(id_: str) -> int | None:
    """The millisecond an id was made at; None for an id made before the current
    alphabet (or not made by new_id)."""
    head = id_.partition("_")[2][:10]  # 50 bits: the 48 of the millisecond and 2 more
    if len(head) < 10 or not head[0].isdigit() or any(c not in ALPHABET for c in head):
        return None
    value = 0
    for char in head:
        value = value * 32 + ALPHABET.index(char)
    return value >> 2


def id_field(prefix: str) -> models.CharField:
    """The primary key of a model whose ids look like `<prefix>_…`."""
    return models.CharField(
        primary_key=True,
        max_length=ID_LENGTH,
        default=functools.partial(new_id, prefix),
        editable=False,
    )
