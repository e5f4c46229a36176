"""An in-process store: for tests, scripts, and single-process receivers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from homing_receiver.dedup import ClaimResult

# Expired records are dropped by a full sweep every this many claims, so memory
# stays bounded by the live window without an O(n) scan on every call.
_SWEEP_EVERY = 1000


@dataclass
class _Record:
    state: str  # "in_progress" or "done"
    owner: str
    expires_at: float


@dataclass
class _Sequences:
    mark: int = 0
    seen_above: set[int] = field(default_factory=set)

    def advance(self) -> None:
        while self.mark + 1 in self.seen_above:
            self.mark += 1
            self.seen_above.discard(self.mark)


class MemoryStore:
    """Thread-safe dicts of records and sequence marks behind one lock.

    Only deduplicates (and tracks sequences) within one process: use RedisStore or
    DjangoStore when several workers or servers receive webhooks. ``clock`` defaults to
    ``time.monotonic`` so wall-clock jumps do not expire (or revive) records.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._records: dict[str, _Record] = {}
        self._sequences: dict[str, _Sequences] = {}
        self._lock = threading.Lock()
        self._claims = 0

    def claim(self, key: str, owner: str, lease: float) -> ClaimResult:
        with self._lock:
            now = self._clock()
            self._claims += 1
            if self._claims % _SWEEP_EVERY == 0:
                self._sweep(now)
            record = self._records.get(key)
            if record is not None and record.expires_at > now:
                return "done" if record.state == "done" else "in_progress"
            self._records[key] = _Record("in_progress", owner, now + lease)
            return "claimed"

    def complete(self, key: str, owner: str, ttl: float) -> bool:
        with self._lock:
            now = self._clock()
            record = self._records.get(key)
            # Our own lapsed claim that nobody took over still counts as ours.
            if record is not None and record.owner != owner and record.expires_at > now:
                return False
            self._records[key] = _Record("done", owner, now + ttl)
            return True

    def release(self, key: str, owner: str) -> None:
        with self._lock:
            record = self._records.get(key)
            if record is not None and record.owner == owner and record.state == "in_progress":
                del self._records[key]

    def sequence_see(self, endpoint_id: str, sequence: int) -> None:
        with self._lock:
            sequences = self._sequences.setdefault(endpoint_id, _Sequences())
            if sequence > sequences.mark:
                sequences.seen_above.add(sequence)
                sequences.advance()

    def sequence_state(self, endpoint_id: str) -> tuple[int, list[int]]:
        with self._lock:
            sequences = self._sequences.get(endpoint_id, _Sequences())
            return sequences.mark, sorted(sequences.seen_above)

    def sequence_reset(self, endpoint_id: str, to: int) -> None:
        with self._lock:
            sequences = self._sequences.setdefault(endpoint_id, _Sequences())
            sequences.mark = to
            sequences.seen_above = {n for n in sequences.seen_above if n > to}
            sequences.advance()

    def __len__(self) -> int:
        return len(self._records)

    def _sweep(self, now: float) -> None:
        expired = [key for key, record in self._records.items() if record.expires_at <= now]
        for key in expired:
            del self._records[key]
