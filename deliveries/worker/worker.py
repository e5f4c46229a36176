"""The worker: the owner of everything a worker process needs to deliver.

One `Worker` per worker process. It makes its parts, starts them in a declared order and
stops them in reverse (DESIGN.md decision 17: every thread has one owner, started by
`start()` and joined by `close()`, none in a constructor):

1. the gatherers (core/background.py): the wake-up publisher and the counters, which the
   recorder's transactions use;
2. the recorder (recorder.py): a thread writing attempts' results in batches;
3. the releases (releases.py): a thread giving ended requests' cluster places back;
4. the sender (transport/sender.py): one event-loop thread; each attempt (attempt.py) is
   a coroutine on it, bounded by HOMING_DELIVERY_TIMEOUT as a whole;
5. the parker (parker.py): a thread parking deactivated endpoints' backlogs;
6. the claim loop (claim_loop.py): a thread claiming due deliveries and starting them;
7. the watchdog (supervisor.py): if any of these threads dies or is stuck, the process
   exits so that its supervisor starts a new one.

Stopped in reverse, the claim loop ends first, attempts cut short while the sender closes
still have their places released and their results recorded, and the gatherers publish
what the recorder's last transactions said. The ledger (ledger.py) is the one record of
every delivery in hand; the planner (planner.py) and pacing (pacing.py) are the rules the
claim loop consults. No transaction or row lock is held across an HTTP call. If the
process dies, the leases expire and the scheduler retries those deliveries (at least once).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings

from core.background import Gatherer, close_gatherers, start_gatherers
from core.version import VERSION
from deliveries.lifecycle.policy import current_policy
from deliveries.transport.proxy import parse_proxy
from deliveries.transport.sender import Sender
from deliveries.worker.attempt import Attempts
from deliveries.worker.claim_loop import ClaimLoop, claim_patience
from deliveries.worker.claims import Claimed
from deliveries.worker.ledger import Ledger
from deliveries.worker.pacing import Pacing
from deliveries.worker.parker import Parker
from deliveries.worker.planner import endpoint_cap, tenant_cap
from deliveries.worker.recorder import Recorder
from deliveries.worker.releases import Releases
from deliveries.worker.supervisor import Supervisor, Watched

logger = logging.getLogger(__name__)

CLOSE_SECONDS = 5.0  # how long closing waits for each thread to finish what it does

Part = tuple[str, Callable[[], object], Callable[[], object]]


class Worker:
    def __init__(
        self, *, capacity: int | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        capacity = capacity or settings.HOMING_SEND_CONCURRENCY
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stopping = threading.Event()
        self.ledger: Ledger[Claimed] = Ledger(
            capacity=capacity,
            per_endpoint=endpoint_cap(
                capacity=capacity, cluster_cap=settings.HOMING_ENDPOINT_CONCURRENCY
            ),
            per_tenant=tenant_cap(capacity=capacity, share=settings.HOMING_TENANT_SHARE),
            on_endpoint_room=self._ring,
        )
        # The sender has no cap of its own: the ledger bounds the requests under way, in
        # all and per endpoint (endpoints sharing a host and port each have their own).
        self.sender = Sender(
            version=VERSION,
            allow_private_networks=settings.HOMING_ALLOW_PRIVATE_NETWORKS,
            proxy=parse_proxy(proxy) if (proxy := settings.HOMING_EGRESS_PROXY) else None,
        )
        self.pacing = Pacing(retry_budget=settings.HOMING_RETRY_BUDGET)
        self.parker = Parker()
        self.recorder = Recorder(on_deactivate=self.parker.park_later)
        self.releases = Releases(self.ledger, lease_seconds=lambda: current_policy().lease_seconds)
        self.attempts = Attempts(
            sender=self.sender,
            ledger=self.ledger,
            recorder=self.recorder,
            pacing=self.pacing,
            stopping=self._stopping,
        )
        self.claims = ClaimLoop(
            ledger=self.ledger,
            pacing=self.pacing,
            attempts=self.attempts,
            name=self.name,
            stopping=self._stopping,
            clock=clock,
        )
        self.supervisor: Supervisor | None = None
        self._gatherers: list[Gatherer[Any]] = []  # of any item type
        self._started: list[Part] = []

    def _parts(self) -> list[Part]:
        """(name, start, close) of each part, in the order they start; they stop in
        reverse. The module's docstring says why this order."""
        return [
            ("gatherers", self._start_gatherers, lambda: close_gatherers(self._gatherers)),
            ("recorder", self.recorder.start, self.recorder.stop),
            ("releases", self.releases.start, lambda: self.releases.close(CLOSE_SECONDS)),
            ("sender", self.sender.start, self.sender.close),
            ("parker", self.parker.start, lambda: self.parker.close(CLOSE_SECONDS)),
            ("claims", self.claims.start, self._close_claims),
            ("watchdog", self._start_supervisor, self._close_supervisor),
        ]

    def start(self) -> Worker:
        """Start every part, in order."""
        for part in self._parts():
            _, start, _ = part
            start()
            self._started.append(part)
        return self

    @property
    def started_parts(self) -> list[str]:
        """The parts started and not closed yet, in the order they started."""
        return [name for name, _, _ in self._started]

    def wake(self) -> None:
        """A Celery message: look for due work now (claim_loop.ClaimLoop.wake)."""
        self.claims.wake()

    def stop(self) -> None:
        """Claim nothing more; attempts under way carry on (see drain)."""
        # The watchdog first: a shutdown's drain and close are bounded, and nothing from
        # here on is a fault to exit for.
        self._close_supervisor()
        self._stopping.set()
        self._ring()

    def drain(self, timeout: float) -> bool:
        """Give back the deliveries waiting in line and wait until every attempt under way
        is recorded; True if all were."""
        try:
            self.claims.give_back_lines()
        except Exception:
            logger.warning("could not give back deliveries claimed ahead", exc_info=True)
        return self.ledger.wait_idle(timeout)

    def close(self) -> None:
        """Stop every part that start() started, in reverse order, each within a bounded
        wait."""
        self.stop()
        while self._started:
            name, _, close = self._started.pop()
            try:
                close()
            except Exception:
                logger.exception("closing the worker's %s failed", name)
        # The other workers share the endpoints' places without this one (it may have
        # said it sends without being started: the housekeeping says so).
        self.ledger.workers_sending(self.name, sending=False)

    # --- the parts' own steps -----------------------------------------------------------

    def _start_gatherers(self) -> None:
        self._gatherers = start_gatherers()

    def _close_claims(self) -> None:
        self.claims.close(CLOSE_SECONDS)  # out of its claim, its connection closed

    def _start_supervisor(self) -> None:
        self.supervisor = Supervisor(
            watched=self._watched(),
            ping_loop=lambda answer: self.sender.loop.call_soon_threadsafe(answer),
        )
        self.supervisor.start()

    def _close_supervisor(self) -> None:
        if self.supervisor is not None:
            self.supervisor.close()

    def _watched(self) -> list[Watched]:
        threads = [
            Watched(
                "claims",
                lambda: self.claims.thread,
                self.claims.heartbeat,
                patience=claim_patience(current_policy().lease_seconds),
            ),
            Watched("event loop", lambda: self.sender.thread),
            Watched("recorder", lambda: self.recorder.thread, self.recorder.heartbeat),
            Watched("releases", lambda: self.releases.thread, self.releases.heartbeat),
            # No patience: parking a deep backlog takes as long as it takes.
            Watched("parker", lambda: self.parker.thread),
        ]
        for gatherer in self._gatherers:
            threads.append(Watched(gatherer.name, lambda g=gatherer: g.thread))  # type: ignore[misc]  # a lambda's default
        return threads

    def _ring(self) -> None:
        self.claims.ring()
