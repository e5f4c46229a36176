"""What an attempt came to: read by every room of deliveries/, importing none of them.

The transport produces a `SendResult`; the worker hands it to lifecycle's recording; the
lease sweep makes one (`worker lost`) for an attempt whose worker never reported back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ErrorKind(enum.StrEnum):
    """Why an attempt has no status code: what the sender (or the lease sweep) saw."""

    TIMEOUT = "timeout"  # the whole-attempt deadline struck (DNS, connect, TLS, I/O)
    CONNECTION = "connection"  # refused, reset, unknown host, a malformed answer
    TLS = "tls"
    BLOCKED = "blocked"  # the host resolves to a private address (the SSRF guard)
    INVALID_URL = "invalid_url"
    # The egress proxy refused the tunnel (a deny rule, its own auth): retryable, and not
    # the receiver's doing, so it does not count against the endpoint's circuit.
    PROXY = "proxy"
    TOKEN = "token"  # the endpoint's OAuth2 token request failed (retryable)
    # This worker cannot decrypt one of the endpoint's stored secrets (retryable: a worker
    # with the key sends it; the claim gives such deliveries back before this can happen).
    KEY = "key"
    INTERNAL = "internal"  # a bug in Homing, not the receiver's doing
    WORKER_LOST = "worker_lost"  # the lease expired before the worker reported back


@dataclass(frozen=True, slots=True)
class SendResult:
    """What one attempt produced. Exactly one of `status_code` and `error_kind` is set:
    once a status line has arrived the receiver has answered, whatever happens to the
    rest of its body."""

    status_code: int | None
    error: str | None  # human readable: "timeout", "connection error: …", "blocked: …"
    response_body: bytes  # at most the transport's RESPONSE_BODY_LIMIT bytes
    retry_after: str | None  # the raw Retry-After header; retry.parse_retry_after reads it
    duration_ms: int
    error_kind: ErrorKind | None = None

    @classmethod
    def failed(cls, kind: ErrorKind, error: str, duration_ms: int = 0) -> SendResult:
        return cls(None, error, b"", None, duration_ms, kind)
