"""The retry policy's numbers, read once from settings for the pure `retry` functions."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from django.conf import settings

from core.durations import parse_schedule
from deliveries.lifecycle import retry

# Grace on top of the attempt timeout before a claim counts as abandoned. A batch sends
# in parallel, so a healthy worker always records within the timeout plus database time.
LEASE_MARGIN_SECONDS = 15


@dataclass(frozen=True)
class Policy:
    schedule: tuple[float, ...]
    jitter: float
    timeout: float
    ordering_max_block: float = 3600.0  # seconds (HOMING_ORDERING_MAX_BLOCK)

    @property
    def lease_seconds(self) -> float:
        return self.timeout + LEASE_MARGIN_SECONDS

    def delay_after(self, attempt_in_schedule: int, retry_after: float | None) -> float | None:
        return retry.next_delay(
            attempt_number=attempt_in_schedule,
            schedule=self.schedule,
            jitter=self.jitter,
            retry_after=retry_after,
            rng=_rng,
        )


_rng = random.Random()


@functools.cache
def _policy(schedule: str, jitter: float, timeout: float, ordering_max_block: float) -> Policy:
    return Policy(parse_schedule(schedule), jitter, timeout, ordering_max_block)


def current_policy() -> Policy:
    # Keyed on the raw settings so tests that override them get a fresh policy.
    return _policy(
        settings.HOMING_RETRY_SCHEDULE,
        settings.HOMING_RETRY_JITTER,
        settings.HOMING_DELIVERY_TIMEOUT,
        settings.HOMING_ORDERING_MAX_BLOCK,
    )
