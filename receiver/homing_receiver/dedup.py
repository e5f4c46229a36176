"""Run each webhook event's handler at most once per deduplication window.

Senders deliver at least once, so the same event id arrives again after timeouts and
retries. ``Deduplicator`` turns that into "effectively once": the first caller claims
the id in a shared store, runs the handler, and marks the id done; later callers see
"done" (skip) or "in_progress" (try again later).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Literal, Protocol

from homing_receiver.errors import DuplicateInProgress

logger = logging.getLogger("homing_receiver")

ClaimResult = Literal["claimed", "in_progress", "done"]

# Homing, like most senders, stops retrying well within 3 days.
DEFAULT_TTL = 3 * 24 * 3600
# Longer than any sane handler, shorter than the sender's later retry intervals.
DEFAULT_LEASE = 300


class DedupStore(Protocol):
    """The three atomic operations a deduplication store provides.

    A record per key is either absent, ``in_progress`` (held by one owner token until
    the lease runs out) or ``done`` (until the ttl runs out). Expired records count as
    absent. Times are in seconds.
    """

    def claim(self, key: str, owner: str, lease: float) -> ClaimResult:
        """Atomically take *key* for *owner* if absent or expired.

        Returns "claimed" (the record is now in_progress for owner, expiring after
        lease), or else the state of the live record: "in_progress" or "done".
        Of many concurrent claims on one key, exactly one returns "claimed".
        """
        ...

    def complete(self, key: str, owner: str, ttl: float) -> bool:
        """Mark *key* done for *ttl*, unless another owner holds it now.

        Returns False when the owner's lease lapsed and someone else claimed the key
        (both handlers ran: the lease was too short for the handler).
        """
        ...

    def release(self, key: str, owner: str) -> None:
        """Forget *key* if *owner* still holds it in_progress, so a retry can claim it."""
        ...


class Deduplicator:
    """Runs ``handler()`` once per event id across every process sharing *store*."""

    def __init__(
        self, store: DedupStore, ttl: float = DEFAULT_TTL, lease: float = DEFAULT_LEASE
    ) -> None:
        if ttl <= 0 or lease <= 0:
            raise ValueError("ttl and lease must be positive")
        self.store = store
        self.ttl = ttl
        self.lease = lease

    def process(self, event_id: str, handler: Callable[[], object]) -> bool:
        """Run *handler* for *event_id* unless it already ran.

        1. Claim the id: "done" -> return False without running; "in_progress" ->
           raise DuplicateInProgress.
        2. Run the handler. If it raises (anything, even KeyboardInterrupt), release
           the claim so the sender's retry can run it, and re-raise.
        3. Mark the id done for ``ttl`` and return True.
        """
        if not event_id:
            raise ValueError("event_id must not be empty")
        # A fresh random token per call: only this call may complete or release.
        owner = secrets.token_hex(16)
        state = self.store.claim(event_id, owner, self.lease)
        if state == "done":
            return False
        if state == "in_progress":
            raise DuplicateInProgress(event_id)

        try:
            handler()
        except BaseException:
            self._release_quietly(event_id, owner)
            raise

        if not self.store.complete(event_id, owner, self.ttl):
            logger.warning(
                "Event %s: handler outlived its %ss lease and another worker claimed it; "
                "raise the Deduplicator lease",
                event_id,
                self.lease,
            )
        return True

    def _release_quietly(self, event_id: str, owner: str) -> None:
        # The handler's exception is the one the caller must see. If the release
        # fails too (store down), the lease expiry frees the id later anyway.
        try:
            self.store.release(event_id, owner)
        except Exception:
            logger.exception(
                "Event %s: could not release the claim; it frees itself when the lease ends",
                event_id,
            )
