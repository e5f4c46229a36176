"""Turning an attempt's result into the delivery's next state."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from deliveries.lifecycle import retry
from deliveries.lifecycle.policy import Policy
from deliveries.models import Delivery
from deliveries.results import SendResult


class InSchedule(Protocol):
    """All next_state needs of a delivery (a Delivery row, or one in hand: in_hand.py)."""

    @property
    def attempts_in_schedule(self) -> int: ...


@dataclass(frozen=True)
class NextState:
    outcome: retry.Outcome
    fields: dict[str, Any] = field(default_factory=dict)  # what to write on the delivery
    dead_reason: str | None = None
    deactivate_endpoint: bool = False


def next_state(
    *, delivery: InSchedule, result: SendResult, policy: Policy, now: datetime
) -> NextState:
    """Succeeded, pending again with its next due time, or dead with a reason."""
    verdict = retry.classify(
        status_code=result.status_code, error_kind=result.error_kind, error=result.error or ""
    )
    if verdict.outcome == retry.Outcome.SUCCESS:
        return NextState(verdict.outcome, _closed(Delivery.Status.SUCCEEDED, ""))
    attempts = delivery.attempts_in_schedule
    if verdict.outcome == retry.Outcome.RETRYABLE:
        retry_after = retry.parse_retry_after(result.retry_after, now=now)
        delay = policy.delay_after(attempts, retry_after) if attempts >= 1 else 0.0
        if delay is not None:
            return NextState(
                verdict.outcome,
                {
                    "status": Delivery.Status.PENDING,
                    "next_attempt_at": now + timedelta(seconds=delay),
                    "lease_expires_at": None,
                    "last_error": verdict.reason[:500],
                },
            )
        reason = f"{verdict.reason} after {attempts} attempts"
    else:
        reason = verdict.reason
    return NextState(
        verdict.outcome,
        _closed(Delivery.Status.DEAD, reason),
        dead_reason=reason,
        deactivate_endpoint=verdict.deactivate_endpoint,
    )


def _closed(status: str, last_error: str) -> dict[str, Any]:
    return {
        "status": status,
        "next_attempt_at": None,
        "lease_expires_at": None,
        "last_error": last_error[:500],
    }
