"""HOMING_RETRY_BUDGET: while first attempts wait, retries take at most this share of a
worker's sends, so a storm of failing endpoints retrying every second cannot starve
first attempts to healthy endpoints.

The worker notes what each claim took, and tells the budget whether first attempts are
waiting: an endpoint whose last claim gave first attempts, still had more due and may
take more now (an endpoint at its own cap or rate
limit is not held back by retries elsewhere, and must not hold them back either). While
they wait, the next claim may take `retry_allowance()` retries: as many as keep retries
within the share of the last WINDOW claimed attempts; none over it.
"""

from __future__ import annotations

import threading
from collections import deque

WINDOW = 200  # claimed attempts the share is measured over


class RetryBudget:
    def __init__(self, share: float) -> None:
        self.share = share
        self._recent: deque[bool] = deque(maxlen=WINDOW)  # True: a retry
        self._lock = threading.Lock()

    def retry_allowance(self, *, firsts_waiting: bool) -> int | None:
        """How many retries the next claim may take; None: as many as it likes."""
        if not firsts_waiting or self.share >= 1:
            return None
        with self._lock:
            total, retries = len(self._recent), sum(self._recent)
        # x more retries keep (retries + x) / (total + x) within the share.
        return max(0, int((self.share * total - retries) / (1 - self.share)))

    def claimed(self, *, retries: int, firsts: int) -> None:
        with self._lock:
            self._recent.extend([True] * retries + [False] * firsts)
