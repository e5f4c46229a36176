"""The outbox: one row per event to publish, written in the caller's transaction."""

from __future__ import annotations

import secrets
import time

from django.db import models
from django.utils import timezone


def new_outbox_id() -> str:
    # Millisecond timestamp first so ids sort roughly by creation, then 80 random
    # bits. The id doubles as the Idempotency-Key of the row's POST to Homing.
    return f"obx_{int(time.time() * 1000):012x}{secrets.token_hex(10)}"


class OutboxEvent(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    id = models.CharField(primary_key=True, max_length=40, default=new_outbox_id, editable=False)
    type = models.CharField(max_length=255)
    data = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    # How many times a relay tried to send the row, and why the last try failed.
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    sent_at = models.DateTimeField(null=True, blank=True)
    # The id of the event Homing created for this row (from its 202 answer).
    event_id = models.CharField(max_length=255, blank=True, default="")
    # Rows of one key reach Homing in the order their transactions committed:
    # key_sequence is that order (OutboxKey, locked until the writer's commit).
    ordering_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    key_sequence = models.BigIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "outbox event"
        ordering = ["created_at", "id"]
        indexes = [
            # The relay's claim: pending rows, oldest first (... FOR UPDATE SKIP LOCKED),
            # and oldest_pending_age_seconds(). Sent rows, the vast majority, stay out.
            models.Index(
                fields=["created_at", "id"],
                condition=models.Q(status="pending"),
                name="homing_outbox_pending_idx",
            ),
            # The admin's status filter, listed newest first.
            models.Index(fields=["status", "-created_at"], name="homing_outbox_status_idx"),
            # The relay's check that no earlier row of a key is still waiting.
            models.Index(
                fields=["ordering_key", "key_sequence"],
                condition=models.Q(status="pending", ordering_key__isnull=False),
                name="homing_outbox_key_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} ({self.id}, {self.status})"


class OutboxKey(models.Model):
    """The last key_sequence given to a row of one ordering key. A writer updates it in
    its own transaction, so the next writer of the key waits for that commit: key order
    is commit order."""

    key = models.CharField(primary_key=True, max_length=255)
    last = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.key}: {self.last}"
