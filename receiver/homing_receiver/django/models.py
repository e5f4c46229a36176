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
