"""A delivery's statuses: the one vocabulary the model, the services, the API and the
console share. No models here, so any app may import it (webhooks renders statuses too)."""

from __future__ import annotations

from django.db import models


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # waiting for next_attempt_at
    # Waiting for `blocked_by`, the earlier delivery of its ordering key, to finish:
    # outside every due index, spending nothing. The API shows it as pending.
    HELD = "held"
    DELIVERING = "delivering"  # claimed by a worker until lease_expires_at
    SUCCEEDED = "succeeded"
    DEAD = "dead"  # in the dead-letter queue


# Not finished yet: what holds an ordering key's line and a tenant's backlog.
UNFINISHED = (DeliveryStatus.PENDING, DeliveryStatus.HELD, DeliveryStatus.DELIVERING)


def public_status(status: str) -> str:
    """A held delivery (waiting in its ordering key's line) is pending to the API, with
    `blocked_by` naming what it waits for."""
    return DeliveryStatus.PENDING.value if status == DeliveryStatus.HELD else status
