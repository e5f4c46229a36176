"""Opaque, prefixed, time-ordered ids (`evt_01J…`).

The leading 48-bit millisecond timestamp keeps new rows at the right edge of the primary
key index (cheap inserts) and makes ids sort roughly by creation time; 80 random bits
make them unguessable.
"""

from __future__ import annotations

import base64
import functools
import os
import time

from django.db import models

ID_LENGTH = 32  # longest prefix (4) + "_" + 26 base32 characters, with room to spare


def new_id(prefix: str) -> str:
    millis = int(time.time() * 1000).to_bytes(6, "big")
    raw = millis + os.urandom(10)
    return f"{prefix}_{base64.b32encode(raw).decode().rstrip('=').lower()}"


def id_field(prefix: str) -> models.CharField:
    """The primary key of a model whose ids look like `<prefix>_…`."""
    return models.CharField(
        primary_key=True,
        max_length=ID_LENGTH,
        default=functools.partial(new_id, prefix),
        editable=False,
    )
