"""In-flight accounting: how many attempts this process has under way, in all and per
endpoint. The one place capacity is counted; every slot taken is given back once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable


class Slots:
    """`capacity` attempts in flight per process, `per_endpoint` per endpoint.

    A claim first `reserve`s room (waiting for it), then `admit`s what it claimed: each
    admitted delivery holds a slot until `release` (called in a `finally`). Endpoints
    within `claim_margin` of their cap are `busy`: a claim skips them, so one batch
    never takes an endpoint past its cap.
    """

    def __init__(
        self,
        *,
        capacity: int,
        per_endpoint: int,
        claim_margin: int,
        on_endpoint_room: Callable[[], None] = lambda: None,
    ) -> None:
        self.capacity = capacity
        self.per_endpoint = per_endpoint
        self._ceiling = max(1, per_endpoint - claim_margin)
        self._used = 0  # reserved or admitted
        self._endpoints: Counter[str] = Counter()
        self._changed = threading.Condition()
        self._on_endpoint_room = on_endpoint_room

    @property
    def in_flight(self) -> int:
        with self._changed:
            return self._used

    def reserve(self, wanted: int, *, at_least: int = 1, timeout: float | None = None) -> int:
        """Wait until `at_least` slots are free (or `timeout`), take up to `wanted`."""
        enough = max(1, min(wanted, at_least))
        with self._changed:
            if not self._changed.wait_for(lambda: self.capacity - self._used >= enough, timeout):
                return 0
            granted = min(wanted, self.capacity - self._used)
            self._used += granted
            return granted

    def admit(self, endpoint_ids: Iterable[str], reserved: int) -> list[bool]:
        """For each claimed delivery's endpoint: may it go now (under the endpoint's
        cap)? Reservations not turned into admissions are freed."""
        verdict = []
        with self._changed:
            for endpoint in endpoint_ids:
                ok = self._endpoints[endpoint] < self.per_endpoint and reserved > 0
                if ok:
                    self._endpoints[endpoint] += 1
                    reserved -= 1
                verdict.append(ok)
            self._used -= reserved
            self._changed.notify_all()
        return verdict

    def cancel(self, reserved: int) -> None:
        """Give back reservations that were not admitted (the claim failed)."""
        with self._changed:
            self._used -= reserved
            self._changed.notify_all()

    def release(self, endpoint_id: str) -> None:
        """One admitted attempt is over (recorded, or it never started)."""
        with self._changed:
            self._used -= 1
            self._endpoints[endpoint_id] -= 1
            left = self._endpoints[endpoint_id]
            if left <= 0:
                del self._endpoints[endpoint_id]
            self._changed.notify_all()
        if left == self._ceiling - 1:
            self._on_endpoint_room()

    def busy(self) -> set[str]:
        """Endpoints a claim should skip: one more batch could take them past the cap."""
        with self._changed:
            return {e for e, n in self._endpoints.items() if n >= self._ceiling}

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no slot is taken; False if some still were after `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: self._used == 0, timeout=timeout)
