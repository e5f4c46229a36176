"""Exceptions raised by homing_receiver."""

from __future__ import annotations


class WebhookVerificationError(Exception):
    """The request is not an authentic, fresh Standard Webhooks message.

    The message says which check failed (a missing header, a bad or out-of-window
    timestamp, no matching signature, a body that is not a JSON object). It never
    contains the secret or the expected signature.
    """


class DuplicateInProgress(Exception):
    """Another worker holds the claim on this event id and has not finished yet.

    Answer the sender with a non-2xx status (409) so that it retries later: by then
    the other worker has either completed the event (the retry is skipped) or failed
    and released it (the retry processes it).
    """

    def __init__(self, event_id: str) -> None:
        super().__init__(f"Event {event_id!r} is being processed by another worker")
        self.event_id = event_id
