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


class FeedError(Exception):
    """The catch-up feed refused the request, answered nonsense, or stayed unreachable.

    ``status`` is the HTTP status it answered (None when no usable answer arrived:
    connection errors, timeouts and 5xx that lasted longer than the Feed's
    ``retry_for``), ``message`` the reason (the ``message`` of Homing's JSON error body
    when it sent one). A 401 means a wrong API key, a 404 an endpoint id that does not
    exist or belongs to another tenant.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if status is not None else message)
        self.status = status
        self.message = message


class FeedExpired(FeedError):
    """The messages right after the requested sequence are gone (HTTP 410).

    Homing purged them after its retention period. ``oldest_sequence`` is the oldest
    sequence the feed still holds: what lies between your last handled sequence and it
    cannot be fetched. Reconcile that stretch from your own data (or the producer's),
    then ``tracker.reset(to=oldest_sequence - 1)`` and catch up again.
    """

    def __init__(self, oldest_sequence: int, message: str = "") -> None:
        super().__init__(
            message or f"messages before sequence {oldest_sequence} are no longer retained",
            status=410,
        )
        self.oldest_sequence = oldest_sequence
