"""Domain errors; api.errors turns each into the API's JSON answer."""

from __future__ import annotations

from typing import Any


class HomingError(Exception):
    status_code = 400
    retry_after: int | None = None  # whole seconds: the answer's `Retry-After` header

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, Any]:
        """What the answer's body carries besides `message`."""
        return {}


class PayloadTooLarge(HomingError):
    status_code = 413


class Busy(HomingError):
    """Come back shortly: the answer carries `Retry-After`."""

    status_code = 503
    retry_after = 1


class IdempotencyKeyInUse(HomingError):
    """The first request with this key is still being processed."""

    status_code = 409


class IdempotencyKeyMismatch(HomingError):
    """The key was used before with a different request body."""

    status_code = 422


class InvalidInput(HomingError):
    """A 400 naming the field at fault (`type`, `events[3].data`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"Invalid input: {field}: {message}")
        self.field = field
        self.detail = message

    def details(self) -> dict[str, Any]:
        return {"errors": {self.field: [self.detail]}}


class Throttled(HomingError):
    """A 429: the tenant is over one of its backpressure limits; nothing was written.

    `code` names the limit (`rate_limited`, `backlog_full`); `retry_after` is whole
    seconds, as the `Retry-After` header carries it.
    """

    status_code = 429

    def __init__(self, message: str, *, code: str, retry_after: int) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after

    def details(self) -> dict[str, Any]:
        return {"code": self.code}


class StoredValueUnreadable(HomingError):
    """A 409: a value stored encrypted (a secret, a filter) that no key of
    HOMING_ENCRYPTION_KEY opens, asked for on purpose. Replacing it is the way out, so the
    message says how; `field` names it."""

    status_code = 409

    def __init__(self, field: str, remedy: str) -> None:
        super().__init__(
            f"The endpoint's {field} cannot be read: no key of HOMING_ENCRYPTION_KEY opens it "
            f"(the key changed without a rotation, or the stored value is damaged). {remedy}"
        )
        self.field = field

    def details(self) -> dict[str, Any]:
        return {"code": "unreadable", "field": self.field}
