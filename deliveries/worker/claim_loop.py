"""The claim loop: a thread that wakes, claims due deliveries in batches and starts them.

A Celery message (`wake`), an ended request (`ring`) or the idle poll wakes it. Before
each claim it does its housekeeping (`housekeeping`): says this process sends and takes
its part of each endpoint's places, renews the leases of everything in hand, and gives
back what waited too long in line. A claim reserves capacity in the ledger, takes the
probes of open circuits, asks the planner how much of each due endpoint, claims those
rows, and starts each admitted delivery (after its rate limit's delay); the refused wait
in line at an answering endpoint or are given back.

Its database connection has a `statement_timeout`, and the watchdog's patience with one
piece of its work is below a lease: a claim loop stuck on the database makes the process
exit before the leases of what it holds lapse and another worker sends them again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection

from core.clock import database_offset
from deliveries import wakeups
from deliveries.lifecycle.partitions import EVERY_PARTITION, ClaimBounds, claim_bounds
from deliveries.lifecycle.policy import Policy, current_policy
from deliveries.log_context import delivery_log_context
from deliveries.worker.attempt import NEXT_IN_LINE_SECONDS, Attempts
from deliveries.worker.claims import (
    Claimed,
    deliveries_claim_probes,
    deliveries_claim_shares,
    deliveries_due_exist,
    deliveries_give_back,
    deliveries_renew_leases,
)
from deliveries.worker.due import DueEndpoints
from deliveries.worker.ledger import Ledger
from deliveries.worker.pacing import Pacing
from deliveries.worker.planner import (
    BATCH_SIZE,
    MIN_RESERVATION,
    claim_shares,
    endpoint_cap,
    line_length,
)
from deliveries.worker.supervisor import Heartbeat
from webhooks.services.endpoint_readable import endpoint_unreadable

logger = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.25  # an idle worker looks for due work this often (read-only)
ERROR_PAUSE_SECONDS = 1.0
# The leases of the deliveries in hand are renewed when this share of a lease has passed
# since the last renewal: an attempt whose record is slow (a lock held elsewhere, a
# database pause) keeps its lease, so the scheduler does not make it due again meanwhile.
RENEW_LEASES_AFTER = 1 / 3
# How often this process says it sends (and learns how many others do, to share each
# endpoint's places with them): well within ledger.WORKERS_SEEN_SECONDS.
WORKERS_SAY_SECONDS = 1.0
# One statement of the claim loop takes milliseconds; one that waits this long (a lock,
# a stalled server) fails, and the loop pauses and tries again on a fresh connection.
STATEMENT_TIMEOUT = "5s"
BOUNDS_SECONDS = 5.0  # how often the claims' partitions are read again
# A delivery whose endpoint's secret this process cannot decrypt waits this long before
# it is claimed again (by any worker): long enough not to spin, short enough that a
# worker with the key soon sends it.
UNREADABLE_SECRET_WAIT_SECONDS = 30
UNREADABLE_SECRET_ERROR = (
    "cannot decrypt the endpoint's {fields}: this worker's HOMING_ENCRYPTION_KEY lacks the "
    "key that encrypted it (or the stored value is damaged)"
)


def claim_patience(lease_seconds: float) -> float:
    """How long one piece of the claim loop's work may last before the watchdog ends the
    process: half a lease, so the process is gone before the leases it renews lapse."""
    return lease_seconds / 2


class ClaimLoop:
    def __init__(
        self,
        *,
        ledger: Ledger[Claimed],
        pacing: Pacing,
        attempts: Attempts,
        name: str,
        stopping: threading.Event,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ledger = ledger
        self._pacing = pacing
        self._attempts = attempts
        self._name = name
        self._stopping = stopping
        self._clock = clock
        self.heartbeat = Heartbeat()
        self._due = DueEndpoints()
        self._rotation = 0  # which tenant a claim serves first (fair_share.py)
        self._lock = threading.Lock()
        self._message = False  # a Celery message woke us (so the doorbell is up)
        self._woken = threading.Event()
        self._leases_renewed = float("-inf")
        self._bounds, self._bounds_read = EVERY_PARTITION, float("-inf")
        self._workers_said = float("-inf")
        self._configured: Any = None  # the raw connection given its statement_timeout
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="homing-claims", daemon=True)
        self._thread.start()

    def close(self, timeout: float) -> None:
        """Wake the loop to see `stopping`, and wait for it to leave its claim."""
        self._woken.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def wake(self) -> None:
        """A Celery message: look for due endpoints afresh and claim now. The deliveries it
        names are not claimed by id: the fair claim finds them through their endpoint
        (claimed by id, they jumped their endpoint's queue, and the lookup cost 8-17 ms on
        a fresh backlog whose statistics were stale, more than the claim it saved)."""
        with self._lock:
            self._message = True
        self._woken.set()

    def ring(self) -> None:
        """Room at an endpoint (a request ended): claim again now."""
        self._woken.set()

    # --- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._claim_until_stopped()
        finally:
            connection.close()  # this thread's own: nothing else would close it

    def _claim_until_stopped(self) -> None:
        while not self._stopping.is_set():
            woken = self._woken.wait(IDLE_POLL_SECONDS)
            self._woken.clear()
            try:
                with self.heartbeat.working():
                    self.prepare_connection()
                    self.housekeeping()
                    due = self._answer_message() or woken or deliveries_due_exist()
                if not due:
                    continue
                while not self._stopping.is_set():
                    with self.heartbeat.working():
                        if not self.claim_once():
                            break
            except DatabaseError:
                logger.warning("database unavailable while claiming; retrying", exc_info=True)
                connection.close()
                self._stopping.wait(ERROR_PAUSE_SECONDS)
            except Exception:
                logger.exception("claiming deliveries failed; retrying")
                self._stopping.wait(ERROR_PAUSE_SECONDS)

    def prepare_connection(self) -> None:
        """This thread's connection, with the loop's statement_timeout (set again on each
        new connection: a reconnect after an outage starts without it)."""
        connection.ensure_connection()
        if connection.vendor != "postgresql" or connection.connection is self._configured:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [STATEMENT_TIMEOUT])
        self._configured = connection.connection

    def _answer_message(self) -> bool:
        """If a wake-up message came, let the next commit ring the doorbell again and look
        for due endpoints afresh: the claims that follow then cover every wake-up skipped
        while the doorbell was up (wakeups.py). Checked before every claim, so a worker busy
        with a backlog does not leave the doorbell up and new events unannounced."""
        with self._lock:
            message, self._message = self._message, False
        if message:
            wakeups.doorbell_answered()
            self._due.look_again()
        return message

    def housekeeping(self) -> None:
        """What the loop does before each look for work, each part when it is due: say
        this process sends (and take its part of each endpoint's places), renew the leases
        of everything in hand, give back what waited too long in line."""
        now = self._clock()
        if now - self._workers_said >= WORKERS_SAY_SECONDS:
            self._workers_said = now
            workers = self._ledger.workers_sending(self._name)
            self._ledger.set_endpoint_cap(
                endpoint_cap(
                    capacity=self._ledger.capacity,
                    cluster_cap=settings.HOMING_ENDPOINT_CONCURRENCY,
                    workers=workers,
                )
            )
        lease_seconds = current_policy().lease_seconds
        if now - self._leases_renewed >= lease_seconds * RENEW_LEASES_AFTER:
            self._leases_renewed = now
            # Fenced: only where its claim still holds the delivery.
            deliveries_renew_leases(held=self._ledger.held(), lease_seconds=lease_seconds)
            self._ledger.renew_places(lease_seconds=lease_seconds)
        self._give_back(self._ledger.leave_lines(waited=NEXT_IN_LINE_SECONDS))

    def give_back_lines(self) -> None:
        """Everything in line goes back, due again at once (the worker is stopping)."""
        self._give_back(self._ledger.leave_lines(waited=0))

    # --- one claim ----------------------------------------------------------------------

    def claim_once(self) -> bool:
        """Claim one batch and start its attempts; True when more work is likely due."""
        self._answer_message()
        policy = current_policy()
        # Our own ended requests first: woken by them, a claim would otherwise see their
        # places still held in the cluster and take nothing.
        self._ledger.send_releases(lease_seconds=policy.lease_seconds)
        self.housekeeping()
        reserved = self._ledger.reserve(BATCH_SIZE, at_least=MIN_RESERVATION, timeout=1.0)
        if not reserved:
            return not self._stopping.is_set()
        try:
            claimed = self._claim(reserved, policy)
            more_due = len(claimed) == reserved
            claimed = self._signable(claimed)
        except BaseException:
            self._ledger.cancel(reserved)
            raise
        # If the ledger cannot admit them, nothing stays in hand: their leases expire and
        # the scheduler retries them.
        going, refused = self._ledger.admit(claimed, reserved, lease_seconds=policy.lease_seconds)
        try:
            timed, later = self._pacing.send_delays(going, lambda d: d.endpoint.rate_limit)
            for wait in sorted({round(w, 2) for _, w in later}):
                self._give_back(
                    [d for d, w in later if round(w, 2) == wait], delay=timedelta(seconds=wait)
                )
        except BaseException:
            for delivery in [*going, *refused]:  # their leases expire; the sweep retries
                self._ledger.finish(delivery)
            raise
        for delivery, delay in timed:
            self._attempts.start_in(delay, delivery, policy)
        self._line_up_or_give_back(refused)
        return more_due

    def _claim(self, limit: int, policy: Policy) -> list[Claimed]:
        """The probes of open circuits, then rows dealt fairly between tenants within each
        endpoint's room; while first attempts wait, retries get only their allowance."""
        database_offset()  # measured here, now and then, for the event loop's signatures
        probes = deliveries_claim_probes(limit=limit, policy=policy)
        limit -= len(probes.deliveries)
        if limit <= 0:
            return probes.deliveries
        skip = self._pacing.throttled_endpoints() | probes.paused
        bounds = self._claim_bounds()
        due = self._due.current(bounds=bounds)
        allowance = self._pacing.retry_allowance(
            due, lambda e, within: self._ledger.moving(e, within=within)
        )
        self._rotation += 1
        cluster_rooms = _asked_once(self._ledger.cluster_rooms)
        shares = claim_shares(
            limit=limit,
            due=due,
            counts=self._ledger,
            cluster_rooms=cluster_rooms,
            rotation=self._rotation,
            skip=skip,
        )
        claim = deliveries_claim_shares(
            shares=shares, policy=policy, first_attempts_only=allowance is not None, bounds=bounds
        )
        claimed = claim.deliveries
        if allowance is None:
            # Out of what was asked: left out until the next look. (Asked again and again,
            # a drained endpoint's index walk passed over every row claimed since the last
            # vacuum: PostgreSQL's CPU rose by a third in the bench's isolation runs.)
            self._due.exhausted(claim.exhausted)
        elif allowance and len(claimed) < limit and claim.exhausted:
            # Endpoints found without (enough) first attempts: retries may wait there.
            retry_shares = claim_shares(
                limit=min(allowance, limit - len(claimed)),
                due=due,
                counts=self._ledger,
                cluster_rooms=cluster_rooms,
                rotation=self._rotation,
                skip=skip,
                taken=Counter(c.endpoint_id for c in claimed),
                tenants_taken=Counter(c.tenant_id for c in claimed),
            )
            retries = deliveries_claim_shares(
                shares=retry_shares, policy=policy, retries_only=True, bounds=bounds
            )
            claimed = [*claimed, *retries.deliveries]
            self._due.exhausted(claim.exhausted & retries.exhausted)
        self._pacing.claimed(claimed, claim.exhausted)
        return [*probes.deliveries, *claimed]

    def _signable(self, claimed: list[Claimed]) -> list[Claimed]:
        """Those whose endpoint's secrets this process can decrypt (the claim resolved their
        send settings: send_settings.py). The others are given
        back without spending an attempt, due again after UNREADABLE_SECRET_WAIT_SECONDS
        (a worker that has the key sends them): a missing key is the operator's to fix,
        not a reason for a delivery to die."""
        unreadable: dict[str, str] = {}  # endpoint id -> last_error
        for delivery in claimed:
            if delivery.send is None and delivery.endpoint_id not in unreadable:
                # Which ones, for the tenant to replace (rare: the work is done only here).
                names = [
                    n for n in endpoint_unreadable(endpoint=delivery.endpoint) if n != "filter"
                ]
                fields = " and ".join(names or ["secrets"])
                unreadable[delivery.endpoint_id] = UNREADABLE_SECRET_ERROR.format(fields=fields)
        if not unreadable:
            return claimed
        for endpoint_id, error in unreadable.items():
            waiting = [c for c in claimed if c.endpoint_id == endpoint_id]
            for delivery in waiting:
                logger.error(
                    "delivery %s not sent: %s; it waits %d s without spending an attempt",
                    delivery.id,
                    error,
                    UNREADABLE_SECRET_WAIT_SECONDS,
                    extra=delivery_log_context(delivery),
                )
            deliveries_give_back(
                deliveries=waiting,
                delay=timedelta(seconds=UNREADABLE_SECRET_WAIT_SECONDS),
                last_error=error,
            )
        return [c for c in claimed if c.endpoint_id not in unreadable]

    def _claim_bounds(self) -> ClaimBounds:
        """The partitions a claim looks at (partitions.claim_bounds), read again every
        BOUNDS_SECONDS: a delivery made pending in an older one waits that long at most."""
        now = time.monotonic()
        if now - self._bounds_read >= BOUNDS_SECONDS:
            self._bounds, self._bounds_read = claim_bounds(), now
        return self._bounds

    def _line_up_or_give_back(self, refused: list[Claimed]) -> None:
        """Claimed deliveries with no place yet: in line at their endpoint while it answers
        (planner.line_length), else given back, due again at once (the next claim asks the
        endpoint's room first, so they are not claimed again until there is some)."""
        if not refused:
            return
        if self._stopping.is_set():
            self._give_back(refused)
        else:
            self._give_back(self._ledger.line_up(refused, length=_line_length))

    def _give_back(self, deliveries: Sequence[Claimed], delay: timedelta = timedelta(0)) -> None:
        """Claimed deliveries that will not be sent now: due again after `delay` without
        spending an attempt, and out of the ledger (if the database does not answer,
        their leases expire)."""
        if not deliveries:
            return
        try:
            deliveries_give_back(deliveries=deliveries, delay=delay)
        finally:
            for delivery in deliveries:
                self._ledger.finish(delivery)


def _line_length(delivery: Claimed, answered_ago: float, open_to: int) -> int:
    return line_length(
        rate_limit=delivery.endpoint.rate_limit, answered_ago=answered_ago, open_to=open_to
    )


def _asked_once(
    ask: Callable[[list[str]], dict[str, int]],
) -> Callable[[list[str]], dict[str, int]]:
    """The cluster's rooms asked once per claim (one Redis round trip), and reused by the
    retries' share of the same claim."""
    answers: dict[str, int] = {}

    def rooms(endpoint_ids: list[str]) -> dict[str, int]:
        missing = [e for e in endpoint_ids if e not in answers]
        if missing:
            answers.update(ask(missing))
        return {e: answers[e] for e in endpoint_ids}

    return rooms
