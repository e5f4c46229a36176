"""Keyset cursors for the console's lists: signed, so a tampered link is refused."""

from __future__ import annotations

from django.core import signing

SALT = "homing.console.cursor"


class BadCursor(ValueError):
    pass


def cursor_encode(*values: str) -> str:
    return signing.dumps(list(values), salt=SALT, compress=True)


def cursor_decode(token: str, *, size: int) -> list[str]:
    try:
        values = signing.loads(token, salt=SALT)
    except signing.BadSignature as error:
        raise BadCursor("That page link is not valid (tampered or from another server).") from error
    if not isinstance(values, list) or len(values) != size:
        raise BadCursor("That page link is not valid.")
    return [str(value) for value in values]
