"""Errors raised by the client."""

from __future__ import annotations


class HomingError(Exception):
    """Homing refused the request (a 4xx other than 409 and 429), or could not be reached.

    ``status`` is the HTTP status Homing answered (None when no answer arrived) and
    ``message`` the human-readable reason from its JSON error body.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if status is not None else message)
        self.status = status
        self.message = message


class HomingThrottled(HomingError):
    """Homing answered 429 (backpressure) for longer than ``retry_for`` allowed waiting.

    Nothing was written: the same request (same idempotency key) can be sent again after
    ``retry_after`` seconds. ``code`` says which limit: ``rate_limited`` (the tenant's
    events per second) or ``backlog_full`` (its undelivered webhooks).
    """

    #: Seconds Homing asked us to wait (its ``Retry-After``), if it said.
    retry_after: float | None = None
    code: str | None = None


class HomingUnavailable(HomingError):
    """Every attempt within ``retry_for`` failed in a way worth retrying.

    Connection errors, timeouts, 5xx and 409: the event may or may not exist in Homing.
    Publishing again with the same idempotency key is always safe.
    """

    #: Seconds Homing asked us to wait (a ``Retry-After`` header), if it said.
    retry_after: float | None = None
