"""Discarding dead letters: they leave the queue, their delivery stays `dead`."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from core.exceptions import HomingError
from dlq.models import DeadLetter
from dlq.selectors import Criteria, dead_letters_matching

# Rows marked per transaction in a bulk discard: short transactions, no long row locks.
DISCARD_BATCH = 2000


class NotDiscardable(HomingError):
    status_code = 409


def dead_letter_discard(*, dead_letter: DeadLetter) -> None:
    # Conditional: of two staff discarding at once, one marks it, the other is told.
    updated = DeadLetter.objects.filter(pk=dead_letter.pk, discarded_at__isnull=True).update(
        discarded_at=timezone.now()
    )
    if not updated:
        raise NotDiscardable("This dead letter was already discarded.")


def dead_letters_discard(*, criteria: Criteria | dict[str, Any]) -> int:
    """Discard every matching dead letter still in the queue; returns how many.

    Works in batches of DISCARD_BATCH, each its own transaction.
    """
    discarded = 0
    while True:
        with transaction.atomic():
            batch = list(
                dead_letters_matching(criteria=criteria)
                .order_by("pk")
                .values_list("pk", flat=True)[:DISCARD_BATCH]
            )
            if not batch:
                return discarded
            discarded += DeadLetter.objects.filter(pk__in=batch, discarded_at__isnull=True).update(
                discarded_at=timezone.now()
            )
