"""Keyset cursors for the console's lists: signed, so a tampered link is refused."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from django.core import signing
from django.db.models import Model, Q, QuerySet

M = TypeVar("M", bound=Model)

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


def newest_first_page(
    rows: QuerySet[M], *, moment: str, cursor: str, size: int
) -> tuple[list[M], str | None]:
    """A page of `rows` newest first and the next page's cursor (None: the last page),
    keyset on (`moment`, id): a deep page costs what the first one does."""
    rows = rows.order_by(f"-{moment}", "-id")
    if cursor:
        moment_text, last_id = cursor_decode(cursor, size=2)
        after: Any = datetime.fromisoformat(moment_text)
        rows = rows.filter(**{f"{moment}__lte": after}).filter(
            Q(**{f"{moment}__lt": after}) | Q(id__lt=last_id)
        )
    page = list(rows[: size + 1])
    if len(page) <= size:
        return page, None
    last = page[size - 1]
    return page[:size], cursor_encode(getattr(last, moment).isoformat(), str(last.pk))
