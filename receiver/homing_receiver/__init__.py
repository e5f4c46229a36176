"""Verify and deduplicate Standard Webhooks on the receiving side, and catch up on missed ones.

Only the standard library is imported here; the Django integration lives in
``homing_receiver.django`` and RedisStore takes a client you create yourself.
"""

from __future__ import annotations

from homing_receiver.catch_up import catch_up
from homing_receiver.dedup import ClaimResult, Deduplicator, DedupStore
from homing_receiver.errors import (
    DuplicateInProgress,
    FeedError,
    FeedExpired,
    WebhookVerificationError,
)
from homing_receiver.feed import Feed
from homing_receiver.memory import MemoryStore
from homing_receiver.redis_store import RedisStore
from homing_receiver.sequences import (
    SEQUENCE_HEADER,
    SequenceState,
    SequenceStore,
    SequenceTracker,
    sequence_from_headers,
)
from homing_receiver.tracing import parent_context, trace_headers
from homing_receiver.verify import Webhook

__version__ = "0.1.0"

__all__ = [
    "SEQUENCE_HEADER",
    "ClaimResult",
    "DedupStore",
    "Deduplicator",
    "DuplicateInProgress",
    "Feed",
    "FeedError",
    "FeedExpired",
    "MemoryStore",
    "RedisStore",
    "SequenceState",
    "SequenceStore",
    "SequenceTracker",
    "Webhook",
    "WebhookVerificationError",
    "catch_up",
    "parent_context",
    "sequence_from_headers",
    "trace_headers",
]
