"""Verify and deduplicate Standard Webhooks on the receiving side.

Only the standard library is imported here; the Django integration lives in
``homing_receiver.django`` and RedisStore takes a client you create yourself.
"""

from __future__ import annotations

from homing_receiver.dedup import ClaimResult, Deduplicator, DedupStore
from homing_receiver.errors import DuplicateInProgress, WebhookVerificationError
from homing_receiver.memory import MemoryStore
from homing_receiver.redis_store import RedisStore
from homing_receiver.verify import Webhook

__version__ = "0.1.0"

__all__ = [
    "ClaimResult",
    "DedupStore",
    "Deduplicator",
    "DuplicateInProgress",
    "MemoryStore",
    "RedisStore",
    "Webhook",
    "WebhookVerificationError",
]
