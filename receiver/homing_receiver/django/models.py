from __future__ import annotations

from django.db import models


class ProcessedWebhook(models.Model):
    """One row per event id seen within the deduplication window (see DjangoStore)."""

    class State(models.TextChoices):
        IN_PROGRESS = "in_progress"
        DONE = "done"

    # The unique constraint is what makes claim() atomic: of concurrent INSERTs for
    # one key, exactly one succeeds.
    key = models.CharField(max_length=255, unique=True)
    state = models.CharField(max_length=16, choices=State.choices)
    # Random token of the claiming call; complete/release match on it.
    owner = models.CharField(max_length=64)
    # Index: DjangoStore.delete_expired() filters on it.
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        app_label = "homing_receiver"
        db_table = "homing_receiver_processed_webhook"

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"


class SequenceMark(models.Model):
    """Per endpoint: every sequence up to ``last_contiguous`` was seen (see DjangoStore).

    Every sequence_see() locks this row (SELECT ... FOR UPDATE), so the calls of one
    endpoint take turns and the mark never skips a hole or misses a stored sequence.
    """

    # Unique: one row per endpoint, created with INSERT ... ON CONFLICT DO NOTHING.
    endpoint_id = models.CharField(max_length=255, unique=True)
    last_contiguous = models.BigIntegerField(default=0)

    class Meta:
        app_label = "homing_receiver"
        db_table = "homing_receiver_sequence_mark"

    def __str__(self) -> str:
        return f"{self.endpoint_id} up to {self.last_contiguous}"


class SeenSequence(models.Model):
    """A sequence seen above its endpoint's mark; deleted once the mark passes it."""

    endpoint_id = models.CharField(max_length=255)
    sequence = models.BigIntegerField()

    class Meta:
        app_label = "homing_receiver"
        db_table = "homing_receiver_seen_sequence"
        constraints = [
            # Makes a repeated see() a no-op, and its index serves every query here:
            # "sequences of endpoint E above N, ascending" and "delete those up to N".
            models.UniqueConstraint(
                fields=["endpoint_id", "sequence"], name="homing_receiver_seen_sequence_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint_id} #{self.sequence}"
