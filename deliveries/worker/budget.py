"""HOMING_RETRY_BUDGET: while first attempts wait, retries take at most this share of a
worker's sends, so a storm of failing endpoints retrying every second cannot starve
first attempts to healthy endpoints.

The worker notes what each claim took. While retries exceed the budget over the last
WINDOW claimed attempts, its claims ask for first attempts only; a first-only claim
that comes back short means none are waiting, and retries may fill the next claims.
"""

from __future__ import annotations

import threading
from collections import deque

WINDOW = 200  # claimed attempts the share is measured over


class RetryBudget:
    def __init__(self, share: float) -> None:
        self.share = share
        self._recent: deque[bool] = deque(maxlen=WINDOW)  # True: a retry
        self._firsts_waiting = True
        self._lock = threading.Lock()

    def first_attempts_only(self) -> bool:
        """Whether the next claim should take first attempts only."""
        with self._lock:
            if not self._firsts_waiting or not self._recent or self.share >= 1:
                return False
            return sum(self._recent) > self.share * len(self._recent)

    def claimed(self, *, retries: int, firsts: int, first_only: bool, short: bool) -> None:
        """What a claim took; `short`: fewer than asked for (nothing more was due)."""
        with self._lock:
            self._recent.extend([True] * retries + [False] * firsts)
            if first_only:
                self._firsts_waiting = not short
            elif firsts:
                self._firsts_waiting = True
