"""The ledger: the one record of every delivery this worker process has in hand.

A claim first reserves capacity (a count: the claim does not know its deliveries yet),
then each delivery it took gets one entry, which moves through the stages below and
ends once, whatever happens to it:

    reserved ──admit──> in flight ──request_over──> recording ──finish──> (gone)
                  └───> claimed ──line_up──> in line ──(an answer hands over)──> in flight
                           └──────────────────┴──finish (given back)──> (gone)

Every count the worker's rules read is kept here, beside the entries and under one lock:
capacity in use (reservations and entries), requests open per endpoint (entries in
flight, against `endpoint_cap`), each tenant's share (entries not yet recording: a
record takes milliseconds, and counted, those held a fast endpoint's drain at three
quarters of its speed), the lines at answering endpoints, their last answers, and the
places in the cluster-wide cap (concurrency.py) that wait to be handed over or given
back (`send_releases`, a batch per Redis round trip). Nothing else in the worker counts
or caps requests under way: the claim loop, the planner and the attempts read and move
entries through the verbs here, each called in `finally` where a path can fail.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from deliveries.lifecycle.in_hand import InHand
from deliveries.worker import concurrency

D = TypeVar("D", bound=InHand)

FORGET_EVERY = 10_000  # requests ended between two clean-ups of quiet endpoints' answers
FORGET_AFTER_SECONDS = 60.0
# A worker that has not said it sends for this long (it died) no longer shares the
# endpoints' places; a live one says so every WORKERS_SAY_SECONDS (claim_loop.py).
WORKERS_SEEN_SECONDS = 10.0


class Stage(enum.Enum):
    CLAIMED = "claimed"  # holds a capacity slot; refused an endpoint place for now
    IN_LINE = "in line"  # claimed ahead at an answering endpoint: an answer takes it
    IN_FLIGHT = "in flight"  # holds an endpoint place here and in the cluster
    RECORDING = "recording"  # its request is over; its result waits for its record


class Cluster(Protocol):
    """The cluster-wide cap as the ledger uses it (concurrency.py is one; tests give a
    fake)."""

    def acquire(
        self, *, endpoint_ids: Sequence[str], delivery_ids: Sequence[str], lease_seconds: float
    ) -> list[bool]: ...

    def rooms(self, *, endpoint_ids: Sequence[str]) -> dict[str, int]: ...

    def hand_over(
        self, *, handed: Sequence[tuple[str, str, str]], lease_seconds: float
    ) -> None: ...

    def release_many(self, *, finished: Sequence[tuple[str, str]]) -> None: ...

    def renew(self, *, held: Sequence[tuple[str, str]], lease_seconds: float) -> None: ...

    def workers_sending(
        self, *, worker: str, sending: bool = True, within: float = 10.0
    ) -> int: ...


@dataclass(slots=True)
class _Entry(Generic[D]):
    delivery: D
    stage: Stage
    since: float  # monotonic time it entered its stage


class Ledger(Generic[D]):
    def __init__(
        self,
        *,
        capacity: int,
        per_endpoint: int,
        per_tenant: int | None = None,
        cluster: Cluster = concurrency,
        on_endpoint_room: Callable[[], None] = lambda: None,
    ) -> None:
        self.capacity = capacity
        self.per_tenant = capacity if per_tenant is None else per_tenant
        self._per_endpoint = per_endpoint
        self._cluster = cluster
        self._on_endpoint_room = on_endpoint_room
        self._changed = threading.Condition()
        self._reserved = 0
        self._entries: dict[str, _Entry[D]] = {}
        # Kept with the entries, so that each read on the hot path is one lookup.
        self._open: Counter[str] = Counter()  # endpoint -> entries in flight
        self._tenants: Counter[str] = Counter()  # tenant -> entries not yet recording
        self._lines: dict[str, deque[str]] = {}  # endpoint -> ids in line, first first
        self._last_answer: dict[str, float] = {}  # endpoint -> monotonic time
        self._ends = 0
        # Cluster places to hand over and to give back with the next send_releases().
        self._handed: list[tuple[str, str, str]] = []  # (endpoint, finished, successor)
        self._released: list[tuple[str, str]] = []  # (endpoint, delivery)
        self._sending = threading.Lock()  # one batch at a time, in order
        self.releases_waiting = threading.Event()

    # --- capacity -------------------------------------------------------------------

    def reserve(self, wanted: int, *, at_least: int = 1, timeout: float | None = None) -> int:
        """Wait until `at_least` slots are free (or `timeout`), take up to `wanted`."""
        enough = max(1, min(wanted, at_least))
        with self._changed:
            if not self._changed.wait_for(lambda: self._free() >= enough, timeout):
                return 0
            granted = min(wanted, self._free())
            self._reserved += granted
            return granted

    def cancel(self, reserved: int) -> None:
        """Reservations nothing was claimed for (the claim failed)."""
        with self._changed:
            self._reserved -= reserved
            self._changed.notify_all()

    def admit(
        self, claimed: Sequence[D], reserved: int, *, lease_seconds: float
    ) -> tuple[list[D], list[D]]:
        """The deliveries one claim of `reserved` took: (those in flight now, under their
        endpoint's cap here and in the cluster; those claimed, refused a place for now,
        which keep their capacity slot until `line_up` or `finish`). If the cluster
        cannot be asked, none of them stays in hand and the error goes on."""
        now = time.monotonic()
        with self._changed:
            self._reserved -= reserved
            for delivery in claimed:
                fits = self._open[delivery.endpoint_id] < self._per_endpoint
                stage = Stage.IN_FLIGHT if fits else Stage.CLAIMED
                self._entries[delivery.id] = _Entry(delivery, stage, now)
                self._tenants[delivery.tenant_id] += 1
                if fits:
                    self._open[delivery.endpoint_id] += 1
            self._changed.notify_all()  # reservations nothing was claimed for are free
        here = [d for d in claimed if self._entries[d.id].stage is Stage.IN_FLIGHT]
        try:
            places = self._cluster.acquire(
                endpoint_ids=[d.endpoint_id for d in here],
                delivery_ids=[d.id for d in here],
                lease_seconds=lease_seconds,
            )
        except BaseException:
            with self._changed:
                for delivery in claimed:
                    self._drop(delivery.id, release_place=False)
                self._changed.notify_all()
            raise
        full = [d for d, ok in zip(here, places, strict=True) if not ok]
        with self._changed:
            for delivery in full:  # another worker took the last places first
                self._entries[delivery.id].stage = Stage.CLAIMED
                self._close_place(delivery.endpoint_id)
        going = [d for d, ok in zip(here, places, strict=True) if ok]
        going_ids = {d.id for d in going}
        return going, [d for d in claimed if d.id not in going_ids]

    # --- lines ----------------------------------------------------------------------

    def line_up(self, refused: Sequence[D], *, length: Callable[[D, float, int], int]) -> list[D]:
        """Claimed deliveries refused a place wait in line at their endpoint while its line
        is shorter than `length(delivery, seconds since the endpoint answered, requests
        open to it)` (planner.line_length, asked once per endpoint); the others are
        returned, to be given back. One lock for the batch (asked per count, it took four)."""
        given_back = []
        with self._changed:
            now = time.monotonic()
            room: dict[str, int] = {}  # endpoint -> how many more may join its line
            for delivery in refused:
                endpoint_id = delivery.endpoint_id
                line = self._lines.get(endpoint_id)
                if endpoint_id not in room:
                    ago = now - self._last_answer.get(endpoint_id, float("-inf"))
                    allowed = length(delivery, ago, self._open[endpoint_id])
                    room[endpoint_id] = allowed - (len(line) if line else 0)
                if room[endpoint_id] <= 0:
                    given_back.append(delivery)
                    continue
                room[endpoint_id] -= 1
                entry = self._entries[delivery.id]
                entry.stage, entry.since = Stage.IN_LINE, now
                if line is None:
                    line = self._lines[endpoint_id] = deque()
                line.append(delivery.id)
        return given_back

    def leave_lines(self, *, waited: float) -> list[D]:
        """Out of line, to be given back: those that waited `waited` seconds or more
        (0: all). They are claimed again (then `finish`)."""
        if not self._lines:  # the common case, without the lock
            return []
        cutoff = time.monotonic() - waited
        out = []
        with self._changed:
            for endpoint_id, line in list(self._lines.items()):
                while line and self._entries[line[0]].since <= cutoff:
                    entry = self._entries[line.popleft()]
                    entry.stage = Stage.CLAIMED
                    out.append(entry.delivery)
                if not line:
                    del self._lines[endpoint_id]
        return out

    # --- a request ends -------------------------------------------------------------

    def request_over(self, delivery: D, *, answered: bool, max_wait: float = 0.0) -> D | None:
        """`delivery`'s request ended (`answered`: the receiver's status line came); its
        result goes to be recorded. After an answer, the first in line at its endpoint
        (unless it waited `max_wait`) takes its place here and in the cluster and is
        returned, to be sent at once; otherwise the place is free."""
        successor = None
        with self._changed:
            entry = self._entries.get(delivery.id)
            if entry is None or entry.stage is not Stage.IN_FLIGHT:
                return None
            now = time.monotonic()
            entry.stage, entry.since = Stage.RECORDING, now
            self._uncount_tenant(delivery.tenant_id)
            if answered:
                self._last_answer[delivery.endpoint_id] = now
                successor = self._next_in_line(delivery.endpoint_id, now - max_wait)
            if successor is not None:
                self._handed.append((delivery.endpoint_id, delivery.id, successor.id))
            else:
                self._close_place(delivery.endpoint_id)
                self._released.append((delivery.endpoint_id, delivery.id))
            self._note_end()
        self.releases_waiting.set()
        if successor is None:
            # Every time: a claim takes whatever room gathered while the previous one
            # ran, so they batch by themselves (waking once per ten ended requests left
            # a worker holding fewer than ten asleep until its idle poll).
            self._on_endpoint_room()
        return successor

    def finish(self, delivery: D) -> None:
        """The delivery leaves the ledger, whatever its stage: recorded, given back, or
        an attempt that never started (its places come back too)."""
        with self._changed:
            place_freed = self._drop(delivery.id, release_place=True)
            self._changed.notify_all()
        if place_freed:
            self._on_endpoint_room()

    # --- what the worker's rules read -----------------------------------------------

    def set_endpoint_cap(self, per_endpoint: int) -> None:
        with self._changed:
            self._per_endpoint = per_endpoint

    @property
    def endpoint_cap(self) -> int:
        return self._per_endpoint

    @property
    def in_hand(self) -> int:
        """Capacity in use: reservations and entries."""
        with self._changed:
            return self._reserved + len(self._entries)

    def stages(self) -> Counter[Stage]:
        with self._changed:
            return Counter(entry.stage for entry in self._entries.values())

    def room(self, endpoint_id: str) -> int:
        """How many more requests this process may open to the endpoint."""
        with self._changed:
            return max(0, self._per_endpoint - self._open[endpoint_id])

    def open_to(self, endpoint_id: str) -> int:
        with self._changed:
            return self._open[endpoint_id]

    def waiting(self, endpoint_id: str) -> int:
        """Deliveries in line at the endpoint."""
        with self._changed:
            return len(self._lines.get(endpoint_id, ()))

    def tenant_room(self, tenant_id: str) -> int:
        """How many more of the tenant's deliveries may be in flight or in line now."""
        with self._changed:
            return max(0, self.per_tenant - self._tenants[tenant_id])

    def answered(self, endpoint_id: str, *, within: float) -> bool:
        """Whether a request to the endpoint ended with an answer in the last `within`
        seconds (a request that never started is no answer)."""
        with self._changed:
            since = time.monotonic() - self._last_answer.get(endpoint_id, float("-inf"))
            return since < within

    def moving(self, endpoint_id: str, *, within: float) -> bool:
        """Whether the endpoint has room, or answered in the last `within` seconds
        (full, but not stuck)."""
        return self.room(endpoint_id) > 0 or self.answered(endpoint_id, within=within)

    def held(self) -> list[tuple[str, int]]:
        """Every delivery in hand with its claim's attempt number: the leases to renew."""
        with self._changed:
            return [(i, e.delivery.attempt_count) for i, e in self._entries.items()]

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is in hand; False if something still was after `timeout`."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._reserved == 0 and not self._entries, timeout=timeout
            )

    # --- the cluster-wide cap -------------------------------------------------------

    def cluster_rooms(self, endpoint_ids: Sequence[str]) -> dict[str, int]:
        """How many more each endpoint may have in flight across the cluster now."""
        return self._cluster.rooms(endpoint_ids=endpoint_ids)

    def workers_sending(self, worker: str, *, sending: bool = True) -> int:
        """How many worker processes share the cluster's endpoint places now (`worker`,
        this one, counted while `sending`)."""
        return self._cluster.workers_sending(
            worker=worker, sending=sending, within=WORKERS_SEEN_SECONDS
        )

    def renew_places(self, *, lease_seconds: float) -> None:
        """The cluster places of the requests in flight, held a lease from now (with
        their database leases): one that outlives its first lease still counts."""
        with self._changed:
            held = [
                (e.delivery.endpoint_id, i)
                for i, e in self._entries.items()
                if e.stage is Stage.IN_FLIGHT
            ]
        self._cluster.renew(held=held, lease_seconds=lease_seconds)

    def send_releases(self, *, lease_seconds: float) -> None:
        """Hand over and give back the cluster places of the requests ended so far:
        hand-overs first, one batch at a time (a delivery handed a place may end, and
        be released, before its hand-over reached Redis)."""
        with self._sending:
            with self._changed:
                handed, self._handed = self._handed, []
                released, self._released = self._released, []
            if handed:
                self._cluster.hand_over(handed=handed, lease_seconds=lease_seconds)
            if released:
                self._cluster.release_many(finished=released)

    # --- private, under the lock ----------------------------------------------------

    def _free(self) -> int:
        return self.capacity - self._reserved - len(self._entries)

    def _next_in_line(self, endpoint_id: str, cutoff: float) -> D | None:
        line = self._lines.get(endpoint_id)
        if not line or self._entries[line[0]].since <= cutoff:
            return None  # one that waited too long is left for leave_lines
        entry = self._entries[line.popleft()]
        if not line:
            del self._lines[endpoint_id]
        entry.stage, entry.since = Stage.IN_FLIGHT, time.monotonic()
        return entry.delivery

    def _drop(self, delivery_id: str, *, release_place: bool) -> bool:
        """Remove the entry and its counts; True if it held an endpoint place."""
        entry = self._entries.pop(delivery_id, None)
        if entry is None:
            return False
        delivery = entry.delivery
        if entry.stage is Stage.IN_LINE:
            line = self._lines[delivery.endpoint_id]
            line.remove(delivery_id)
            if not line:
                del self._lines[delivery.endpoint_id]
        if entry.stage is not Stage.RECORDING:
            self._uncount_tenant(delivery.tenant_id)
        if entry.stage is Stage.IN_FLIGHT:
            self._close_place(delivery.endpoint_id)
            if release_place:
                self._released.append((delivery.endpoint_id, delivery_id))
                self.releases_waiting.set()
            return True
        return False

    def _close_place(self, endpoint_id: str) -> None:
        self._open[endpoint_id] -= 1
        if self._open[endpoint_id] <= 0:
            del self._open[endpoint_id]

    def _uncount_tenant(self, tenant_id: str) -> None:
        self._tenants[tenant_id] -= 1
        if self._tenants[tenant_id] <= 0:
            del self._tenants[tenant_id]

    def _note_end(self) -> None:
        """Every FORGET_EVERY ended requests, forget the last answers of endpoints with
        nothing open for a while: a process that sent to many endpoints does not keep
        one entry each forever."""
        self._ends += 1
        if self._ends % FORGET_EVERY:
            return
        long_ago = time.monotonic() - FORGET_AFTER_SECONDS
        for endpoint_id in [
            e for e, at in self._last_answer.items() if at < long_ago and e not in self._open
        ]:
            del self._last_answer[endpoint_id]
