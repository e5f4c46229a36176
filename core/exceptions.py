"""Domain errors; the API's exception handler turns each into a JSON answer."""

from __future__ import annotations


class HomingError(Exception):
    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PayloadTooLarge(HomingError):
    status_code = 413


class IdempotencyKeyInUse(HomingError):
    """The first request with this key is still being processed."""

    status_code = 409


class IdempotencyKeyMismatch(HomingError):
    """The key was used before with a different request body."""

    status_code = 422


class InvalidInput(HomingError):
    """Bad input found by a service (not a serializer): 400 naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message
