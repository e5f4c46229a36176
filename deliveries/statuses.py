"""What the API calls a delivery's status (no models here: any app may render it)."""

from __future__ import annotations


def public_status(status: str) -> str:
    """A held delivery (waiting in its ordering key's line) is pending to the API, with
    `blocked_by` naming what it waits for."""
    return "pending" if status == "held" else status
