"""In-flight accounting: how many attempts this process has under way, in all, per
tenant and per endpoint. The one place capacity is counted; every slot taken is given
back once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from deliveries.lifecycle.in_hand import InHand

FORGET_EVERY = 10_000  # requests ended between two clean-ups of quiet endpoints' answers
FORGET_AFTER_SECONDS = 60.0


class Slots:
    """`capacity` attempts under way per process, `per_endpoint` requests open per endpoint.
    A tenant's capacity slots are counted too (`tenant_room`): claims keep each tenant
    within HOMING_TENANT_SHARE of the capacity, since a request under way cannot be
    taken back: the places another tenant may need are kept free before it needs them.

    A tenant's share counts its requests under way and its deliveries waiting to start
    (in line), not results waiting for their record: a record takes milliseconds, and
    counted, those held a fast endpoint's drain at three quarters of its speed.

    A claim first `reserve`s room (waiting for it), then `admit`s what it claimed. An
    admitted delivery holds its endpoint slot until its request is over (`leave`, or
    `pass_on` to the next delivery to that endpoint) and its capacity slot until its
    result is recorded (`free`); `release` does both, for an attempt that never started.
    A refused delivery keeps its capacity slot until the caller `free`s it or admits it
    later by `pass_on`. Claims ask each endpoint for at most its `room`.
    """

    def __init__(
        self,
        *,
        capacity: int,
        per_endpoint: int,
        per_tenant: int | None = None,
        on_endpoint_room: Callable[[], None] = lambda: None,
    ) -> None:
        self.capacity = capacity
        self.per_endpoint = per_endpoint
        self.per_tenant = capacity if per_tenant is None else per_tenant
        self._used = 0  # reserved or admitted
        self._endpoints: Counter[str] = Counter()
        self._tenants: Counter[str] = Counter()  # requests under way or waiting to start
        self._tenant_of: dict[str, str] = {}  # delivery id -> its tenant, while counted
        self._held: dict[str, int] = {}  # delivery id -> its claim's attempt_count
        self._last_left: dict[str, float] = {}  # endpoint -> monotonic time of its last answer
        self._drops = 0
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

    def admit(self, deliveries: Sequence[InHand], reserved: int) -> list[bool]:
        """For each delivery one claim of at most `reserved` took: may it go now (under
        its endpoint's cap)? Each keeps a capacity slot, admitted or not, counted for its
        tenant and held (its lease renewed) until the caller frees it; reservations
        nothing was claimed for are freed."""
        verdict = []
        with self._changed:
            for delivery in deliveries:
                endpoint = delivery.endpoint_id
                self._tenants[delivery.tenant_id] += 1
                self._tenant_of[delivery.id] = delivery.tenant_id
                self._held[delivery.id] = delivery.attempt_count
                ok = self._endpoints[endpoint] < self.per_endpoint
                if ok:
                    self._endpoints[endpoint] += 1
                verdict.append(ok)
            self._used -= reserved - len(deliveries)
            self._changed.notify_all()
        return verdict

    def cancel(self, reserved: int) -> None:
        """Give back reservations that were not admitted (the claim failed)."""
        with self._changed:
            self._used -= reserved
            self._changed.notify_all()

    def room(self, endpoint_id: str) -> int:
        """How many more requests this process may open to the endpoint."""
        with self._changed:
            return max(0, self.per_endpoint - self._endpoints[endpoint_id])

    def tenant_room(self, tenant_id: str) -> int:
        """How many more of the tenant's deliveries may be under way or in line now."""
        with self._changed:
            return max(0, self.per_tenant - self._tenants[tenant_id])

    def moving(self, endpoint_id: str, within: float) -> bool:
        """Whether the endpoint has room, or answered a request in the last `within`
        seconds (full, but not stuck)."""
        with self._changed:
            if self._endpoints[endpoint_id] < self.per_endpoint:
                return True
            return time.monotonic() - self._last_left.get(endpoint_id, float("-inf")) < within

    def open_to(self, endpoint_id: str) -> int:
        """Requests this process has open to the endpoint (admitted, not over)."""
        with self._changed:
            return self._endpoints[endpoint_id]

    def answered(self, endpoint_id: str, within: float) -> bool:
        """Whether a request to the endpoint ended with an answer in the last `within`
        seconds (a request that never started is no answer)."""
        with self._changed:
            return time.monotonic() - self._last_left.get(endpoint_id, float("-inf")) < within

    def full(self) -> set[str]:
        """Endpoints this process may open no more requests to now."""
        with self._changed:
            return {e for e, n in self._endpoints.items() if n >= self.per_endpoint}

    def leave(self, delivery: InHand, *, answered: bool = True) -> None:
        """An admitted attempt's request is over (`answered`: the receiver's status line
        came): its endpoint slot and its place in its tenant's share are free, and the
        claims are woken. (Every time: a claim
        takes whatever room gathered while the previous one ran, so they batch by
        themselves; waking once per ten finished requests left a worker holding fewer
        than ten asleep until its idle poll.)"""
        self._drop(delivery.endpoint_id, answered=answered)
        with self._changed:
            self._uncount(delivery.id)
        self._on_endpoint_room()

    def withdraw(self, endpoint_id: str) -> None:
        """An admitted attempt will not start (it keeps its capacity slot): its endpoint
        slot is free. Not an answer, and no wake-up: its claim goes on."""
        self._drop(endpoint_id, answered=False)

    def pass_on(self, finished: InHand) -> None:
        """An admitted attempt's request is over and a refused delivery to the same
        endpoint takes its endpoint slot (it holds its capacity slot already)."""
        with self._changed:
            self._last_left[finished.endpoint_id] = time.monotonic()
            self._uncount(finished.id)

    def _drop(self, endpoint_id: str, *, answered: bool) -> None:
        with self._changed:
            self._endpoints[endpoint_id] -= 1
            if self._endpoints[endpoint_id] <= 0:
                del self._endpoints[endpoint_id]
            if answered:
                # Kept when nothing is open any more: the next claim's requests are sent
                # to an endpoint that answers (requests ending between two claims of a
                # fast endpoint often leave none open).
                self._last_left[endpoint_id] = time.monotonic()
            self._drops += 1
            if self._drops % FORGET_EVERY == 0:
                self._forget_quiet_endpoints()

    def _forget_quiet_endpoints(self) -> None:
        """Last answers of endpoints with nothing open for a while: a process that sent to
        many endpoints does not keep one entry each forever."""
        long_ago = time.monotonic() - FORGET_AFTER_SECONDS
        for endpoint_id in [
            e for e, at in self._last_left.items() if at < long_ago and e not in self._endpoints
        ]:
            del self._last_left[endpoint_id]

    def free(self, delivery: InHand) -> None:
        """An admitted attempt is over and recorded, or a refused delivery was given
        back: its capacity slot is free."""
        with self._changed:
            self._used -= 1
            self._held.pop(delivery.id, None)
            self._uncount(delivery.id)  # given back from the line: never under way
            self._changed.notify_all()

    def _uncount(self, delivery_id: str) -> None:
        """The delivery leaves its tenant's share (once: its request ended, or it was
        given back without one)."""
        tenant_id = self._tenant_of.pop(delivery_id, None)
        if tenant_id is not None:
            self._tenants[tenant_id] -= 1
            if self._tenants[tenant_id] <= 0:
                del self._tenants[tenant_id]

    def release(self, delivery: InHand) -> None:
        """An admitted attempt that will not happen (or never reached the recorder)."""
        self.leave(delivery, answered=False)
        self.free(delivery)

    def held(self) -> list[tuple[str, int]]:
        """Every delivery holding a capacity slot, with its claim's attempt_count: the
        leases to renew."""
        with self._changed:
            return list(self._held.items())

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no slot is taken; False if some still were after `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: self._used == 0, timeout=timeout)
