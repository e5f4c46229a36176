from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deliveries.lifecycle.attempt_stats import attempt_minutes_add
from deliveries.models import AttemptMinute

pytestmark = pytest.mark.django_db


def test_it_adds_up_attempts_of_one_minute_by_outcome() -> None:
    attempt_minutes_add(
        counts={"success": 3, "retryable": 1}, at=datetime(2026, 11, 23, 10, 4, 5, tzinfo=UTC)
    )
    attempt_minutes_add(
        counts={"success": 2, "fatal": 0}, at=datetime(2026, 11, 23, 10, 4, 59, tzinfo=UTC)
    )
    attempt_minutes_add(counts={"success": 7}, at=datetime(2026, 11, 23, 10, 5, 0, tzinfo=UTC))

    rows = {
        (row.minute.strftime("%H:%M"), row.outcome): row.count
        for row in AttemptMinute.objects.all()
    }
    assert rows == {("10:04", "success"): 5, ("10:04", "retryable"): 1, ("10:05", "success"): 7}
