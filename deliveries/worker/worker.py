"""The worker: claim due deliveries, send them, record the attempts.

One `Worker` per worker process owns everything that moves a delivery:
- the claim loop (a thread): Celery messages and an idle poll wake it; it claims due
  deliveries in batches with a lease, while the slots have room;
- the ledger (ledger.py): the one account of attempts in flight, here (slots.py: in all,
  per tenant and per endpoint, with the leases the claim loop renews) and in the
  cluster-wide cap (concurrency.py); every place is taken and given back through it;
- the next in line (line.py): deliveries claimed beyond an answering endpoint's room,
  each answer handing its slot straight to one of them (no claim between two requests);
- the sender (sender.py): one event-loop thread; each attempt is a coroutine bounded by
  HOMING_DELIVERY_TIMEOUT as a whole;
- the recorder (recorder.py): a thread writing results in batches;
- the parker (parker.py, a thread): deactivated endpoints' backlogs go to the dead-letter
  queue in bounded batches, never on the recorder's thread;
- the releases (releases.py, a thread): finished requests' places in the cluster-wide
  cap, given back in batches;
- the gatherers (core/background.py): the wake-up publisher and the counters;
- the watchdog (supervisor.py): if any of these threads dies or is stuck, the process
  exits so that its supervisor starts a new one.

`start()` starts every one of these threads and `close()` stops and joins each.

No transaction or row lock is held across an HTTP call. If the process dies, the leases
expire and the scheduler retries those deliveries (at least once).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection

from core.background import Gatherer, close_gatherers, start_gatherers
from core.clock import database_offset, database_time
from core.crypto import DecryptionFailed
from core.version import VERSION
from deliveries import queue as wakeups
from deliveries import rate_limits
from deliveries.fair_share import DueEndpoint, fair_shares
from deliveries.log_context import delivery_log_context
from deliveries.policy import Policy, current_policy
from deliveries.retry import ErrorKind
from deliveries.sender import Sender, SendResult
from deliveries.services.claims import (
    BATCH_SIZE,
    Claimed,
    deliveries_claim_fairly,
    deliveries_due_exist,
    deliveries_give_back,
    deliveries_renew_leases,
)
from deliveries.services.recording import Outcome, Recorded
from deliveries.signing import SEQUENCE_HEADER, payload_bytes, webhook_headers
from deliveries.worker.budget import RetryBudget
from deliveries.worker.due import DueEndpoints
from deliveries.worker.ledger import Ledger
from deliveries.worker.line import NextInLine
from deliveries.worker.parker import Parker
from deliveries.worker.recorder import Recorder
from deliveries.worker.releases import Releases
from deliveries.worker.slots import Slots
from deliveries.worker.supervisor import Heartbeat, Supervisor, Watched
from webhooks.services.endpoints import endpoint_headers, endpoint_signing_secrets

logger = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.25  # an idle worker looks for due work this often (read-only)
ERROR_PAUSE_SECONDS = 1.0
CLOSE_SECONDS = 5.0  # how long closing waits for the claim loop to finish its claim
# A claim waits until at least this many slots are free: not a claim per freed slot.
MIN_RESERVATION = 10
# A rate-limited attempt whose send time is at most this far off is held in memory until
# then (well within its lease); later ones are given back without spending an attempt.
RATE_HOLD_SECONDS = 2.0
# An endpoint at its cap whose first attempts wait counts for the retry budget while it
# answered a request with a success this recently (budget.py).
FIRSTS_MOVING_SECONDS = 1.0
# An endpoint that answered this recently with a success may have LINE_PER_REQUEST
# deliveries claimed ahead per request of ours open to it: each success hands its slot to
# one (measured, one endpoint at the default cap of 50: a freed slot otherwise sat ~15 ms
# until the next claim took it, and one worker drained 969/s instead of 1,330-1,540/s).
# Four, not two: with two workers sharing one endpoint (25 places each) a line of two per
# request ran dry between claims (~30 ms apart): 3,280-3,301/s against 3,312-3,817/s.
# Only a success: a failing endpoint's circuit may be opening, and an open circuit sends
# only probes (handed over after 503s, a line of 100 went out after it opened).
ANSWERING_SECONDS = 0.5
LINE_PER_REQUEST = 4
# A delivery claimed ahead that no answer took within this is given back: its lease must
# still cover a whole attempt when it starts.
NEXT_IN_LINE_SECONDS = 2.0
# A delivery whose endpoint's secret this process cannot decrypt waits this long before
# it is claimed again (by any worker): long enough not to spin, short enough that a
# worker with the key soon sends it.
UNREADABLE_SECRET_WAIT_SECONDS = 30
# The leases of the deliveries this process holds (in flight, in line, waiting for their
# record) are renewed when this share of a lease has passed since the last renewal: an
# attempt whose record is slow (a lock held elsewhere, a database pause) keeps its lease,
# so the scheduler does not make it due again while it is still under way.
RENEW_LEASES_AFTER = 1 / 3
# How often this process says it sends (and learns how many others do, to share each
# endpoint's places with them): well within ledger.WORKERS_SEEN_SECONDS.
WORKERS_SAY_SECONDS = 1.0
UNREADABLE_SECRET_ERROR = (
    "cannot decrypt the endpoint's signing secret: this worker's HOMING_ENCRYPTION_KEY "
    "lacks the key that encrypted it"
)


def endpoint_cap(capacity: int, workers: int = 1) -> int:
    """Attempts one endpoint may have in flight in one process: half the capacity, so a
    hanging endpoint leaves the other half to everyone else, and this process's part of
    the cluster-wide HOMING_ENDPOINT_CONCURRENCY among the `workers` sending. (Whoever
    took an endpoint's places first kept them, handing each to the next in its line:
    with two workers draining one endpoint, one held nearly all 50 and ran at its CPU's
    limit while the other idled; shared 25 and 25, the drain rose from ~2,000/s to
    ~2,500-2,900/s.)"""
    share = -(-settings.HOMING_ENDPOINT_CONCURRENCY // max(1, workers))  # rounded up
    return max(1, min(capacity // 2, share))


def tenant_cap(capacity: int) -> int:
    """Capacity slots one tenant's deliveries may hold in one process (CONTRACT section
    5): HOMING_TENANT_SHARE of it, so the rest is free when another tenant's work comes,
    however slow the first tenant's endpoints are."""
    return max(1, int(capacity * settings.HOMING_TENANT_SHARE))


class Worker:
    def __init__(self, *, capacity: int | None = None) -> None:
        capacity = capacity or settings.HOMING_SEND_CONCURRENCY
        self.slots = Slots(
            capacity=capacity,
            per_endpoint=endpoint_cap(capacity),
            per_tenant=tenant_cap(capacity),
            on_endpoint_room=self._wake,
        )
        # The sender has no cap of its own: the slots bound the requests under way, in
        # all and per endpoint (endpoints sharing a host and port each have their own).
        self.sender = Sender(
            version=VERSION, allow_private_networks=settings.HOMING_ALLOW_PRIVATE_NETWORKS
        )
        self.budget = RetryBudget(settings.HOMING_RETRY_BUDGET)
        self.parker = Parker()
        self.releases = Releases(lease_seconds=lambda: current_policy().lease_seconds)
        # Every place an attempt takes, here and in the cluster, is taken and given back
        # through the ledger; the slots are read directly (rooms, answers, leases held).
        self.ledger = Ledger(self.slots, self.releases)
        self.recorder = Recorder(on_deactivate=self.parker.park_later)
        self.due = DueEndpoints()
        self._rotation = 0  # which tenant a claim serves first (fair_share.py)
        self._with_firsts: set[str] = set()  # endpoints whose first attempts wait
        # Rate-limited endpoint -> when this process last sent to it (the loop's clock).
        self._last_sent: dict[str, float] = {}
        self.line: NextInLine[tuple[Claimed, Policy]] = NextInLine(max_wait=NEXT_IN_LINE_SECONDS)
        self._lock = threading.Lock()
        self._message = False  # a Celery message woke us (so the doorbell is up)
        self._woken = threading.Event()
        self._stopping = threading.Event()
        self._throttled: dict[str, float] = {}  # endpoint id -> monotonic time it may go
        # Every thread is started by start() and stopped by close() (DESIGN.md 17).
        self._threads: dict[str, threading.Thread] = {}
        self._gatherers: list[Gatherer[Any]] = []  # of any item type
        self._leases_renewed = time.monotonic()
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._workers_said = float("-inf")
        self._claims_heartbeat = Heartbeat()
        self.supervisor: Supervisor | None = None

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> Worker:
        """Start every thread this process needs to deliver, and the watchdog over them."""
        # The recorder's transactions publish wake-ups and count through the gatherers.
        self._gatherers = start_gatherers()
        self.sender.start()
        self.recorder.start()
        for name, target in (
            ("homing-claims", self.run),
            ("homing-releases", self.releases.run_until_closed),
            ("homing-parker", self.parker.run_until_closed),
        ):
            self._threads[name] = threading.Thread(target=target, name=name, daemon=True)
            self._threads[name].start()
        self.supervisor = Supervisor(
            watched=self._watched(),
            ping_loop=lambda answer: self.sender.loop.call_soon_threadsafe(answer),
        )
        self.supervisor.start()
        return self

    def _watched(self) -> list[Watched]:
        threads = [
            Watched("claims", lambda: self._threads["homing-claims"], self._claims_heartbeat),
            Watched("event loop", lambda: self.sender.thread),
            Watched("recorder", lambda: self.recorder.thread, self.recorder.heartbeat),
            Watched("releases", lambda: self._threads["homing-releases"], self.releases.heartbeat),
            # No patience: parking a deep backlog takes as long as it takes.
            Watched("parker", lambda: self._threads["homing-parker"]),
        ]
        for gatherer in self._gatherers:
            threads.append(Watched(gatherer.name, lambda g=gatherer: g.thread))  # type: ignore[misc]  # a lambda's default
        return threads

    def wake(self) -> None:
        """A Celery message: look for due endpoints afresh and claim now. The deliveries
        it names are not claimed by id: the fair claim finds them through their endpoint
        (claimed by id, they jumped their endpoint's queue, and the lookup cost 8-17 ms
        on a fresh backlog whose statistics were stale, more than the claim it saved)."""
        with self._lock:
            self._message = True
        self._woken.set()

    def stop(self) -> None:
        """Claim nothing more; attempts under way carry on (see drain)."""
        if self.supervisor is not None:
            # The claim loop ends now, and a shutdown's drain and close are bounded:
            # nothing from here on is a fault to exit for.
            self.supervisor.close()
        self._stopping.set()
        self._woken.set()

    def drain(self, timeout: float) -> bool:
        """Give back the deliveries claimed ahead and wait until every attempt under way
        is recorded; True if all were."""
        try:
            self._give_back([delivery for delivery, _ in self.line.leave(waited=0)])
        except Exception:
            logger.warning("could not give back deliveries claimed ahead", exc_info=True)
        return self.slots.wait_idle(timeout)

    def close(self) -> None:
        """Stop and join every thread start() started, each within a bounded wait."""
        self.stop()  # the watchdog first: threads that stop now are no fault
        claims = self._threads.get("homing-claims")
        if claims is not None:
            claims.join(timeout=CLOSE_SECONDS)  # out of its claim, its connection closed
        self.ledger.workers_sending(self.name, sending=False)  # the others share without it
        self.recorder.stop()
        self.sender.close()
        self.releases.close()
        self.parker.close()
        for name in ("homing-releases", "homing-parker"):
            if name in self._threads:
                self._threads[name].join(timeout=CLOSE_SECONDS)
        self.releases.send()  # what the releases thread has not sent yet
        close_gatherers(self._gatherers)

    # --- the claim loop ----------------------------------------------------------------

    def run(self) -> None:
        try:
            self._claim_until_stopped()
        finally:
            connection.close()  # this thread's own: nothing else would close it

    def _claim_until_stopped(self) -> None:
        while not self._stopping.is_set():
            woken = self._woken.wait(IDLE_POLL_SECONDS)
            self._woken.clear()
            try:
                with self._claims_heartbeat.working():
                    self._share_endpoints()
                    self._renew_leases()
                    self._give_back_waited_too_long()
                    due = self._answer_message() or woken or deliveries_due_exist()
                if not due:
                    continue
                while not self._stopping.is_set():
                    with self._claims_heartbeat.working():
                        if not self._claim_and_send():
                            break
            except DatabaseError:
                logger.warning("database unavailable while claiming; retrying", exc_info=True)
                connection.close()
                self._stopping.wait(ERROR_PAUSE_SECONDS)
            except Exception:
                logger.exception("claiming deliveries failed; retrying")
                self._stopping.wait(ERROR_PAUSE_SECONDS)

    def _answer_message(self) -> bool:
        """If a wake-up message came, let the next commit ring the doorbell again and look
        for due endpoints afresh: the claims that follow then cover every wake-up skipped
        while the doorbell was up (see queue.py). Checked before every claim, so a worker
        busy with a backlog does not leave the doorbell up and new events unannounced."""
        with self._lock:
            message, self._message = self._message, False
        if message:
            wakeups.doorbell_answered()
            self.due.look_again()
        return message

    def _claim_and_send(self) -> bool:
        """Claim one batch and start its attempts; True when more work is likely due."""
        self._answer_message()
        # Our own finished requests first: woken by them, a claim would otherwise see
        # their slots still held in the cluster and take nothing.
        self.releases.send()
        self._share_endpoints()
        self._renew_leases()
        self._give_back_waited_too_long()
        policy = current_policy()
        reserved = self.slots.reserve(BATCH_SIZE, at_least=MIN_RESERVATION, timeout=1.0)
        if not reserved:
            return not self._stopping.is_set()
        try:
            claimed = self._claim(reserved, policy)
            more_due = len(claimed) == reserved
            claimed = self._signable(claimed)
        except BaseException:
            self.slots.cancel(reserved)
            raise
        # If the ledger cannot admit them, nothing stays counted: their leases expire and
        # the scheduler retries them.
        admitted, refused = self.ledger.admit(claimed, reserved, lease_seconds=policy.lease_seconds)
        try:
            timed = self._within_rate_limits(admitted)
        except BaseException:
            for delivery in admitted:  # their leases expire; the scheduler retries them
                self.ledger.release(delivery)
            for delivery in refused:
                self.ledger.finish(delivery)
            raise
        for delivery, delay in timed:
            # A rate-limited attempt is held until its send time (within its lease).
            self.sender.loop.call_soon_threadsafe(self._start_attempt_in, delay, delivery, policy)
        self._line_up_or_give_back(refused, policy)
        return more_due

    def _share_endpoints(self) -> None:
        """Every WORKERS_SAY_SECONDS: say this process sends, and take its part of each
        endpoint's cluster-wide places (endpoint_cap)."""
        if time.monotonic() - self._workers_said < WORKERS_SAY_SECONDS:
            return
        self._workers_said = time.monotonic()
        workers = self.ledger.workers_sending(self.name)
        self.slots.per_endpoint = endpoint_cap(self.slots.capacity, workers)

    def _renew_leases(self) -> None:
        """Every RENEW_LEASES_AFTER of a lease, one statement renews the leases of every
        delivery this process holds (fenced: only where its claim still holds it)."""
        lease_seconds = current_policy().lease_seconds
        if time.monotonic() - self._leases_renewed < lease_seconds * RENEW_LEASES_AFTER:
            return
        self._leases_renewed = time.monotonic()
        deliveries_renew_leases(held=self.slots.held(), lease_seconds=lease_seconds)
        self.ledger.renew_places(lease_seconds=lease_seconds)

    def _signable(self, claimed: list[Claimed]) -> list[Claimed]:
        """Those whose endpoint's secrets this process can decrypt. The others are given
        back without spending an attempt, due again after UNREADABLE_SECRET_WAIT_SECONDS
        (a worker that has the key sends them; during a key rotation this one may get it
        at its next restart): a missing key is the operator's to fix, not a reason for
        a delivery to die."""
        unreadable = set()
        for endpoint in {c.endpoint_id: c.endpoint for c in claimed}.values():
            try:
                endpoint_signing_secrets(endpoint=endpoint)  # cached: cheap after the first
            except DecryptionFailed:
                unreadable.add(endpoint.id)
        if not unreadable:
            return claimed
        waiting = [c for c in claimed if c.endpoint_id in unreadable]
        for delivery in waiting:
            logger.error(
                "delivery %s not sent: %s; it waits %d s without spending an attempt",
                delivery.id,
                UNREADABLE_SECRET_ERROR,
                UNREADABLE_SECRET_WAIT_SECONDS,
                extra=delivery_log_context(delivery),
            )
        deliveries_give_back(
            deliveries=waiting,
            delay=timedelta(seconds=UNREADABLE_SECRET_WAIT_SECONDS),
            last_error=UNREADABLE_SECRET_ERROR,
        )
        return [c for c in claimed if c.endpoint_id not in unreadable]

    def _claim(self, limit: int, policy: Policy) -> list[Claimed]:
        """Claim fairly between tenants, within each endpoint's room and the retry budget:
        while first attempts wait, retries get only their allowance (budget.py)."""
        database_offset()  # measured here, now and then, for the event loop's signatures
        skip = self._throttled_endpoints()
        due, room = self._due_with_room(limit, skip)
        # An endpoint at its cap counts while it answers (its first attempts wait for the
        # workers' sends); a stuck one does not hold retries to everyone else back.
        firsts_waiting = any(
            e.id in self._with_firsts and self.slots.moving(e.id, within=FIRSTS_MOVING_SECONDS)
            for e in self.due.current()
        )
        allowance = self.budget.retry_allowance(firsts_waiting=firsts_waiting)
        self._rotation += 1
        claim = deliveries_claim_fairly(
            limit=limit,
            policy=policy,
            due=due,
            room=room,
            rotation=self._rotation,
            tenant_room=self.slots.tenant_room,
            skip_endpoints=skip,
            first_attempts_only=allowance is not None,
        )
        claimed = claim.deliveries
        if allowance is None:
            self.due.exhausted(claim.exhausted)  # nothing more due there for now
        elif allowance and len(claimed) < limit and claim.exhausted:
            # Endpoints found without (enough) first attempts: retries may wait there.
            taken = Counter(c.endpoint_id for c in claimed)
            by_tenant = Counter(c.tenant_id for c in claimed)
            retries = deliveries_claim_fairly(
                limit=min(allowance, limit - len(claimed)),
                policy=policy,
                due=due,
                room=lambda e: room(e) - taken[e.id],
                tenant_room=lambda t: self.slots.tenant_room(t) - by_tenant[t],
                rotation=self._rotation,
                skip_endpoints=skip,
                retries_only=True,
            )
            claimed += retries.deliveries
            # Out of both: left out until the next look. (Asked again and again, a drained
            # endpoint's index walk passed over every row claimed since the last vacuum:
            # PostgreSQL's CPU rose by a third in the bench's isolation runs.)
            self.due.exhausted(claim.exhausted & retries.exhausted)
        firsts = [c.endpoint_id for c in claimed if c.attempts_in_schedule == 1]
        self._with_firsts = (self._with_firsts | set(firsts)) - claim.exhausted
        self.budget.claimed(retries=len(claimed) - len(firsts), firsts=len(firsts))
        return claimed

    def _line_up_or_give_back(self, deliveries: list[Claimed], policy: Policy) -> None:
        """Claimed deliveries with no slot yet: next in line at their endpoint while it
        answers (LINE_PER_REQUEST per request of ours open to it: each answer takes one),
        else given back, due again at once (the next claim asks the endpoint's room
        first, so they are not claimed again until there is some)."""
        given_back = []
        for delivery in deliveries:
            endpoint_id = delivery.endpoint_id
            length = LINE_PER_REQUEST * self.slots.open_to(endpoint_id)
            if (
                self._stopping.is_set()
                or not self._lines_up(endpoint_id, delivery.endpoint.rate_limit)
                or self.line.waiting(endpoint_id) >= length
            ):
                given_back.append(delivery)
            else:
                self.line.join(endpoint_id, (delivery, policy))
        self._give_back(given_back)

    def _lines_up(self, endpoint_id: str, rate_limit: int | None) -> bool:
        """Whether deliveries may wait in line at an endpoint: it answers with successes,
        and no rate limit spaces its requests (the spacing decides when they go)."""
        return not rate_limit and self.slots.answered(endpoint_id, within=ANSWERING_SECONDS)

    def _give_back_waited_too_long(self) -> None:
        """Deliveries no answer took within NEXT_IN_LINE_SECONDS: due again at once."""
        waited = self.line.leave(waited=NEXT_IN_LINE_SECONDS)
        self._give_back([delivery for delivery, _ in waited])

    def _give_back(self, deliveries: list[Claimed]) -> None:
        """Claimed deliveries that will not be sent now: due again at once, and their
        capacity slots (their leases expire if the database does not answer)."""
        if not deliveries:
            return
        try:
            deliveries_give_back(deliveries=deliveries)
        finally:
            for delivery in deliveries:
                self.ledger.finish(delivery)

    def _within_rate_limits(self, deliveries: list[Claimed]) -> list[tuple[Claimed, float]]:
        """Those that may be sent within RATE_HOLD_SECONDS, each with its send delay
        (rate_limits.py); the others are given back without spending an attempt, and
        claims skip their endpoint until its next send time."""
        delays = rate_limits.send_delays(
            endpoint_ids=[d.endpoint_id for d in deliveries],
            limits={
                d.endpoint_id: d.endpoint.rate_limit for d in deliveries if d.endpoint.rate_limit
            },
            hold=RATE_HOLD_SECONDS,
        )
        throttled = [(d, -delay) for d, delay in zip(deliveries, delays, strict=True) if delay < 0]
        if throttled:
            now = time.monotonic()
            with self._lock:
                for delivery, wait in throttled:
                    self._throttled[delivery.endpoint_id] = now + wait
            try:
                for wait in {round(w, 2) for _, w in throttled}:
                    deliveries_give_back(
                        deliveries=[d for d, w in throttled if round(w, 2) == wait],
                        delay=timedelta(seconds=wait),
                    )
            finally:
                for delivery, _ in throttled:
                    self.ledger.release(delivery)
        return [(d, delay) for d, delay in zip(deliveries, delays, strict=True) if delay >= 0]

    def _throttled_endpoints(self) -> set[str]:
        """Endpoints rate-limited until later, or found full across the cluster."""
        now = time.monotonic()
        with self._lock:
            for endpoint_id in [e for e, until in self._throttled.items() if until <= now]:
                del self._throttled[endpoint_id]
            return set(self._throttled)

    def _due_with_room(
        self, limit: int, skip: set[str]
    ) -> tuple[list[DueEndpoint], Callable[[DueEndpoint], int]]:
        """The due endpoints a claim may ask, and each one's room: what this process may
        still open to it, what its rate limit lets go within RATE_HOLD_SECONDS, and what
        the cluster may (one Redis round trip, for the endpoints a fair share would ask)."""
        due = [e for e in self.due.current() if e.id not in skip]

        rooms: dict[str, int] = {}

        def here(endpoint: DueEndpoint) -> int:
            # At most its rate room; for the cluster's room, Redis is asked next.
            if self._lines_up(endpoint.id, endpoint.rate_limit):
                return rate_room(endpoint)
            return min(self.slots.room(endpoint.id), rate_room(endpoint))

        def room(endpoint: DueEndpoint) -> int:
            # What may go now, and at an endpoint that answers, enough to wait in line
            # behind every request of ours open to it once these went.
            if endpoint.id not in rooms:
                going = min(self.slots.room(endpoint.id), cluster.get(endpoint.id, 0))
                ahead = 0
                if self._lines_up(endpoint.id, endpoint.rate_limit):
                    open_then = self.slots.open_to(endpoint.id) + going
                    ahead = max(0, LINE_PER_REQUEST * open_then - self.line.waiting(endpoint.id))
                rooms[endpoint.id] = min(going + ahead, rate_room(endpoint))
            return rooms[endpoint.id]

        wanted = fair_shares(
            limit=limit,
            endpoints=due,
            room=here,
            rotation=self._rotation,
            tenant_room=self.slots.tenant_room,
        )
        cluster = self.ledger.cluster_rooms(list(wanted))
        return [e for e in due if e.id in wanted and room(e) > 0], room

    def _request_over(self, delivery: Claimed, *, answered: bool) -> None:
        """On the event loop, as a request ends: after a success (`answered`), its
        endpoint slot goes to the delivery next in line there, sent at once; else (a
        failure, a timeout, a refused connection: no reason to hurry, and the endpoint's
        circuit may be opening) it is left, and the line waits for the claims' verdict."""
        following = None
        if answered and not self._stopping.is_set():  # stopping: drain gives the line back
            following = self.line.next(delivery.endpoint_id)
        if following is None:
            self.ledger.request_over(delivery, answered=answered)
            return
        successor, policy = following
        self.ledger.hand_over(delivery, successor)
        self._start_attempt(successor, policy)

    # --- one attempt (on the sender's event loop) --------------------------------------

    def _start_attempt_in(self, delay: float, delivery: Claimed, policy: Policy) -> None:
        if delay > 0:
            self.sender.loop.call_later(delay, self._start_attempt, delivery, policy)
        else:
            self._start_attempt(delivery, policy)

    def _start_attempt(self, delivery: Claimed, policy: Policy) -> None:
        rate_limit = delivery.endpoint.rate_limit
        if rate_limit:
            # Timers that a busy event loop fires late fire together: keep this process's
            # attempts to a rate-limited endpoint at least one interval apart anyway.
            now, gap = self.sender.loop.time(), rate_limits.interval(rate_limit)
            early = self._last_sent.get(delivery.endpoint_id, -gap) + gap - now
            if early > 0:
                self.sender.loop.call_later(early, self._start_attempt, delivery, policy)
                return
            self._last_sent[delivery.endpoint_id] = now
        self.sender.loop.create_task(self._attempt(delivery, policy))

    async def _attempt(self, delivery: Claimed, policy: Policy) -> None:
        """Send one delivery and hand the result to the recorder; its slot is released
        once the result is recorded, or here if it never reaches the recorder."""
        submitted = False
        try:
            started_at = datetime.now(UTC)  # timezone.now() reads a setting: per attempt
            result = None
            try:
                result = await self._send(delivery, policy)
            finally:
                # The request is over: the endpoint may take another one now; the
                # capacity slot waits for the record (results held in memory are bounded).
                self._request_over(delivery, answered=succeeded(result))
            self.recorder.submit(
                Outcome(delivery, result, started_at, policy),
                lambda _: self.ledger.finish(delivery),
            )
            submitted = True
        finally:
            if not submitted:
                self.ledger.finish(delivery)

    async def _send(self, delivery: Claimed, policy: Policy) -> SendResult | None:
        """The attempt's result, or None when the endpoint was deactivated since the claim."""
        endpoint = delivery.endpoint
        if not endpoint.is_active:
            return None
        try:
            event = delivery.event
            body = payload_bytes(
                event_id=event.id,
                event_type=event.type,
                timestamp_iso=event_timestamp(event.created_at),
                data=event.data,
            )
            headers = {
                **endpoint_headers(endpoint=endpoint),
                **webhook_headers(
                    msg_id=event.id,
                    # The database's clock: a receiver checks it against true time.
                    timestamp=int(database_time(measure=False)),
                    body=body,
                    secrets=endpoint_signing_secrets(endpoint=endpoint),
                ),
                SEQUENCE_HEADER: str(delivery.sequence),
            }
        except Exception as exc:  # a bug (a missing key was caught at the claim): fatal
            logger.critical(
                "delivery %s cannot be sent: a bug",
                delivery.id,
                exc_info=True,
                extra=delivery_log_context(delivery),
            )
            return SendResult.failed(ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}")
        result = await self.sender.post(
            url=endpoint.url,
            body=body,
            headers=headers,
            timeout=policy.timeout,
            tenant=delivery.tenant_id,
        )
        if result.error_kind is ErrorKind.INTERNAL:
            logger.critical(
                "delivery %s: the sender failed (a bug): %s",
                delivery.id,
                result.error,
                extra=delivery_log_context(delivery),
            )
        return result

    def _wake(self) -> None:
        self._woken.set()


def succeeded(result: SendResult | None) -> bool:
    """A 2xx answer (CONTRACT section 4): the endpoint takes requests as fast as we send."""
    return result is not None and result.status_code is not None and 200 <= result.status_code < 300


def rate_room(endpoint: DueEndpoint) -> int:
    """How many of the endpoint's deliveries one claim takes at most: with a rate limit,
    what may be sent within RATE_HOLD_SECONDS (the rest would only be given back)."""
    if not endpoint.rate_limit:
        return BATCH_SIZE
    return max(1, int(endpoint.rate_limit * RATE_HOLD_SECONDS / rate_limits.SPACING_MARGIN))


def event_timestamp(created_at: datetime) -> str:
    return created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")


__all__ = ["Recorded", "Worker", "event_timestamp"]
