"""Deliveries claimed ahead of a slot, waiting in line at their endpoint.

At an endpoint that answers, a claim may take more deliveries than it has room for
(worker.py decides how many): they wait here, and each answer from the endpoint hands
its slot to the first in line, sent at once, with no claim between two requests. One
that waits too long is taken out to be given back: its lease must still cover a whole
attempt when it starts.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Generic, TypeVar

Item = TypeVar("Item")


class NextInLine(Generic[Item]):
    def __init__(self, *, max_wait: float) -> None:
        self.max_wait = max_wait
        self._lines: dict[str, deque[tuple[Item, float]]] = {}  # endpoint -> (item, since)
        self._lock = threading.Lock()

    def waiting(self, endpoint_id: str) -> int:
        with self._lock:
            return len(self._lines.get(endpoint_id, ()))

    def join(self, endpoint_id: str, item: Item) -> None:
        with self._lock:
            self._lines.setdefault(endpoint_id, deque()).append((item, time.monotonic()))

    def next(self, endpoint_id: str) -> Item | None:
        """The first in line at the endpoint, unless it waited `max_wait` (it is left
        for `leave`)."""
        with self._lock:
            line = self._lines.get(endpoint_id)
            if not line or time.monotonic() - line[0][1] >= self.max_wait:
                return None
            item, _ = line.popleft()
            if not line:
                del self._lines[endpoint_id]
            return item

    def leave(self, *, waited: float) -> list[Item]:
        """Take out everything that waited `waited` seconds or more (0: everything)."""
        if not self._lines:  # the common case, without the lock
            return []
        cutoff = time.monotonic() - waited
        out = []
        with self._lock:
            for endpoint_id, line in list(self._lines.items()):
                while line and line[0][1] <= cutoff:
                    out.append(line.popleft()[0])
                if not line:
                    del self._lines[endpoint_id]
        return out
