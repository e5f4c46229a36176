"""Fill an endpoint's gaps from the catch-up feed, in sequence order."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from homing_receiver.dedup import Deduplicator
from homing_receiver.errors import DuplicateInProgress
from homing_receiver.feed import Feed
from homing_receiver.sequences import SequenceTracker

logger = logging.getLogger("homing_receiver")


def catch_up(
    tracker: SequenceTracker,
    feed: Feed,
    handler: Callable[[dict[str, Any]], object],
    deduplicator: Deduplicator | None = None,
) -> int:
    """Handle every message after ``tracker.last_contiguous()`` that was not seen yet.

    1. Read the tracker once; then read the feed from its mark, page by page.
    2. Skip each message the tracker had seen (handled live).
    3. Call ``handler(message)`` for the others, in sequence order — through
       ``deduplicator.process(message["event_id"], ...)`` when given, so a message
       handled live meanwhile (its ``webhook-id`` is the event id) is not handled
       twice; one being handled live right now is left to that delivery.
    4. After each handler returns, ``tracker.see(sequence)``.

    Returns how many messages the handler was called for (not counting those the
    deduplicator skipped). An exception from the handler or the feed (``FeedError``,
    ``FeedExpired``) stops the run and propagates; what was handled before it stays
    recorded, so the next run starts after it.
    """
    state = tracker.state()
    expected = state.last_contiguous + 1
    handled = 0
    for message in feed.since(state.last_contiguous):
        sequence = message["sequence"]
        if state.count_unseen(expected, sequence - 1):
            # The feed holds no message for them: purged while the rest was kept.
            logger.warning(
                "Endpoint %s: sequences %s-%s are missing from the catch-up feed",
                tracker.endpoint_id,
                expected,
                sequence - 1,
            )
        expected = sequence + 1
        if state.has_seen(sequence):
            continue
        if deduplicator is None:
            handler(message)
            ran = True
        else:
            try:
                ran = deduplicator.process(message["event_id"], functools.partial(handler, message))
            except DuplicateInProgress:
                # A live delivery of it is being handled; it records the sequence
                # itself when done (or leaves the gap for the next run if it fails).
                logger.info(
                    "Endpoint %s: sequence %s is being handled live; left to it",
                    tracker.endpoint_id,
                    sequence,
                )
                continue
        tracker.see(sequence)
        handled += ran
    return handled
