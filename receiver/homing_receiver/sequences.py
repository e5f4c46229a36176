"""Know which webhooks of an endpoint you have handled, and which you missed.

Homing numbers an endpoint's webhooks 1, 2, 3, … without gaps (the ``homing-sequence``
header, the same on every retry and replay). ``SequenceTracker`` records the numbers a
receiver has handled and answers what is missing; ``catch_up`` fetches the missing ones
from the catch-up feed.

A store keeps, per endpoint, a *mark* (every sequence up to it was seen) and the
sequences seen above it. Seeing ``mark + 1`` advances the mark past every stored
sequence that follows without a hole and forgets them, so storage only grows while
there is a gap, and by what arrived after it.
"""

from __future__ import annotations

import bisect
import functools
import logging
import re
from dataclasses import dataclass
from typing import Protocol

from homing_receiver.verify import HeadersLike, extract_headers

logger = logging.getLogger("homing_receiver")

SEQUENCE_HEADER = "homing-sequence"

# 2**53: every sequence up to it is exact in a JSON number and in Redis' Lua (a double).
# An endpoint receiving a million webhooks a second needs 285 years to get there.
MAX_SEQUENCE = 2**53
# 1-15 digits: below MAX_SEQUENCE, and a hostile header cannot make int() chew on
# thousands of digits.
_SEQUENCE_TEXT = re.compile(r"[0-9]{1,15}")


class SequenceStore(Protocol):
    """The three operations a sequence store provides, each atomic per endpoint.

    MemoryStore, RedisStore and homing_receiver.django.DjangoStore implement it, next to
    the deduplication methods, so one store object serves both.
    """

    def sequence_see(self, endpoint_id: str, sequence: int) -> None:
        """Record *sequence* as seen (again is a no-op), then advance the endpoint's mark.

        The mark moves to the highest n such that every sequence up to n was seen; the
        stored sequences it passed are forgotten. Concurrent calls for one endpoint
        must end in the same state as the same calls made one after another.
        """
        ...

    def sequence_state(self, endpoint_id: str) -> tuple[int, list[int]]:
        """Return (mark, the sequences seen above it in ascending order); (0, []) if new."""
        ...

    def sequence_reset(self, endpoint_id: str, to: int) -> None:
        """Set the mark to *to*: forget what is stored at or below it, keep what is
        above it, and advance the mark over what follows without a hole."""
        ...


@dataclass(frozen=True)
class SequenceState:
    """What a tracker knew at one moment."""

    last_contiguous: int
    # Sequences seen above last_contiguous, ascending; never includes last_contiguous + 1.
    seen_above: tuple[int, ...]

    @property
    def gaps(self) -> list[tuple[int, int]]:
        """Missing ranges (first, last), inclusive, up to the highest sequence seen."""
        gaps = []
        expected = self.last_contiguous + 1
        for sequence in self.seen_above:
            if sequence > expected:
                gaps.append((expected, sequence - 1))
            expected = sequence + 1
        return gaps

    def has_seen(self, sequence: int) -> bool:
        return sequence <= self.last_contiguous or sequence in self._seen_set

    def count_unseen(self, first: int, last: int) -> int:
        """How many sequences in first..last (inclusive) were not seen."""
        first = max(first, self.last_contiguous + 1)
        if last < first:
            return 0
        seen = bisect.bisect_right(self.seen_above, last) - bisect.bisect_left(
            self.seen_above, first
        )
        return last - first + 1 - seen

    @functools.cached_property
    def _seen_set(self) -> frozenset[int]:
        return frozenset(self.seen_above)


class SequenceTracker:
    """The sequences of one endpoint's webhooks that this receiver has handled.

    Call ``see(n)`` once the webhook with ``homing-sequence: n`` has been handled (the
    Django ``webhook_view(tracker=...)`` does it for you). Every process sharing
    *store* shares what it records.
    """

    def __init__(self, store: SequenceStore, endpoint_id: str) -> None:
        if not endpoint_id:
            raise ValueError("endpoint_id must not be empty")
        self.store = store
        self.endpoint_id = endpoint_id

    def see(self, sequence: int) -> None:
        """Record that the webhook numbered *sequence* was handled (idempotent)."""
        self.store.sequence_see(self.endpoint_id, _checked(sequence, minimum=1))

    def last_contiguous(self) -> int:
        """The highest n such that every sequence 1..n was seen; 0 when none was."""
        return self.state().last_contiguous

    def gaps(self) -> list[tuple[int, int]]:
        """Missing ranges (first, last), inclusive, below the highest sequence seen.

        Empty when nothing is missing. A webhook lost after the highest one seen
        leaves no gap until a later one arrives; run ``catch_up`` on start-up and
        periodically to find those too.
        """
        return self.state().gaps

    def state(self) -> SequenceState:
        """last_contiguous and the sequences seen above it, read together."""
        mark, seen_above = self.store.sequence_state(self.endpoint_id)
        return SequenceState(mark, tuple(seen_above))

    def reset(self, to: int) -> None:
        """Treat every sequence up to *to* as seen, and no other below it.

        For recovering from ``FeedExpired``: once your data is reconciled another way,
        ``reset(to=error.oldest_sequence - 1)`` makes the next ``catch_up`` start at
        the oldest message the feed still holds. Sequences seen above *to* are kept.
        """
        self.store.sequence_reset(self.endpoint_id, _checked(to, minimum=0))


def _checked(sequence: int, *, minimum: int) -> int:
    # bool is an int subclass; True must not pass for sequence 1.
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        raise TypeError(f"a sequence is an int, not {type(sequence).__name__}")
    if not minimum <= sequence <= MAX_SEQUENCE:
        raise ValueError(f"sequence {sequence} is outside {minimum}..{MAX_SEQUENCE}")
    return sequence


def sequence_from_headers(headers: HeadersLike) -> int | None:
    """The ``homing-sequence`` of a webhook request; None when absent or malformed.

    *headers* is anything ``Webhook.verify`` accepts (a dict, Django's or Flask's
    ``request.headers``, a WSGI environ, a list of pairs). A malformed value is logged
    as a warning and ignored: a receiver must not fail a webhook over it.
    """
    value = extract_headers(headers, names=(SEQUENCE_HEADER,)).get(SEQUENCE_HEADER)
    if value is None:
        return None
    if not _SEQUENCE_TEXT.fullmatch(value) or int(value) < 1:
        logger.warning("Ignored malformed %s header: %r", SEQUENCE_HEADER, value[:32])
        return None
    return int(value)
