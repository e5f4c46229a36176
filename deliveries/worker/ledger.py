"""The ledger: the one account of this process's attempts in flight.

What it counts lives in two places, and only the ledger writes to either: the slots
(slots.py: in all, per tenant, per endpoint, and the leases held) and the cluster-wide
cap (concurrency.py: each endpoint's places across every worker, given back in batches
by releases.py). Its verbs, each called once per delivery on every path, `finally`
included:

- `admit`: a claimed batch takes endpoint places here and in the cluster; the refused
  keep their capacity slot (to wait in line, or be given back and `finish`ed);
- `hand_over`: a finished request's endpoint place goes to the delivery next in line;
- `request_over`: a request ended (answered or not): its endpoint places are free;
- `finish`: its result is recorded, or it was given back: its capacity slot is free.
  `release` is both last two, for an attempt that never started.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TypeVar

from deliveries.lifecycle.in_hand import InHand
from deliveries.worker import concurrency
from deliveries.worker.releases import Cluster, Releases
from deliveries.worker.slots import Slots

D = TypeVar("D", bound=InHand)

# A worker that has not said it sends for this long (it died) no longer shares the
# endpoints' places; a live one says so every WORKERS_SAY_SECONDS (worker.py).
WORKERS_SEEN_SECONDS = 10.0


class Ledger:
    def __init__(self, slots: Slots, releases: Releases, cluster: Cluster = concurrency) -> None:
        self.slots = slots
        self.releases = releases
        self._cluster = cluster
        # Delivery -> endpoint, for each place held in the cluster (renew_places).
        self._places: dict[str, str] = {}
        self._lock = threading.Lock()

    def admit(
        self, claimed: Sequence[D], reserved: int, *, lease_seconds: float
    ) -> tuple[list[D], list[D]]:
        """(those that may go now: under their endpoint's cap here and in the cluster, the
        others: each keeps its capacity slot). If the cluster cannot be asked, nothing of
        the batch stays counted and the error goes on."""
        verdict = self.slots.admit(claimed, reserved)
        here = [d for d, ok in zip(claimed, verdict, strict=True) if ok]
        refused = [d for d, ok in zip(claimed, verdict, strict=True) if not ok]
        try:
            places = self._cluster.acquire(
                endpoint_ids=[d.endpoint_id for d in here],
                delivery_ids=[d.id for d in here],
                lease_seconds=lease_seconds,
            )
        except BaseException:
            for delivery in here:
                self.slots.withdraw(delivery.endpoint_id)
            for delivery in claimed:
                self.slots.free(delivery)
            raise
        full = [d for d, ok in zip(here, places, strict=True) if not ok]
        for delivery in full:  # another worker took the last places first
            self.slots.withdraw(delivery.endpoint_id)
        with self._lock:
            for delivery, ok in zip(here, places, strict=True):
                if ok:
                    self._places[delivery.id] = delivery.endpoint_id
        return [d for d, ok in zip(here, places, strict=True) if ok], refused + full

    def cluster_rooms(self, endpoint_ids: Sequence[str]) -> dict[str, int]:
        """How many more each endpoint may have in flight across the cluster now."""
        return self._cluster.rooms(endpoint_ids=endpoint_ids)

    def workers_sending(self, worker: str, *, sending: bool = True) -> int:
        """How many worker processes share the cluster's endpoint places now (`worker`,
        this one, counted while `sending`)."""
        return self._cluster.workers_sending(
            worker=worker, sending=sending, within=WORKERS_SEEN_SECONDS
        )

    def hand_over(self, finished: InHand, successor: InHand) -> None:
        """`finished`'s request is over and `successor` (claimed ahead, holding its
        capacity slot) takes its endpoint place, here and in the cluster."""
        self.slots.pass_on(finished)
        with self._lock:
            self._places.pop(finished.id, None)
            self._places[successor.id] = successor.endpoint_id
        self.releases.handed_over(finished.endpoint_id, finished.id, successor.id)

    def request_over(self, delivery: InHand, *, answered: bool) -> None:
        """The request ended (`answered`: the receiver's status line came): its endpoint
        place here at once, in the cluster with the next batch of releases."""
        self.slots.leave(delivery, answered=answered)
        with self._lock:
            self._places.pop(delivery.id, None)
        self.releases.finished(delivery.endpoint_id, delivery.id)

    def renew_places(self, *, lease_seconds: float) -> None:
        """The cluster places of the requests under way, held a lease from now (with
        their database leases, worker.py): one that outlives its first lease still counts."""
        with self._lock:
            held = [(endpoint_id, delivery_id) for delivery_id, endpoint_id in self._places.items()]
        self._cluster.renew(held=held, lease_seconds=lease_seconds)

    def finish(self, delivery: InHand) -> None:
        """Recorded, or given back: its capacity slot is free."""
        self.slots.free(delivery)

    def release(self, delivery: InHand) -> None:
        """An admitted attempt that will not happen (or never reached the recorder)."""
        self.request_over(delivery, answered=False)
        self.finish(delivery)
