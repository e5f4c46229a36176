"""The worker's job: claim due deliveries, send them in parallel, record the attempts.

No transaction or row lock is held across an HTTP call:
1. claim (claims.py, driven by dispatcher.py): one conditional UPDATE takes due rows
   with a lease;
2. send: each attempt in a sending thread, bounded by HOMING_DELIVERY_TIMEOUT;
3. record (recording.py): the recorder thread writes results in batches.
A hanging endpoint holds sending threads (at most ENDPOINT_MAX_IN_FLIGHT), never the
dispatcher or a Celery worker slot. If the process dies meanwhile, the leases expire and
the scheduler retries those deliveries.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from config.logs import delivery_log_context
from config.version import VERSION
from deliveries import rate_limits
from deliveries.policy import Policy
from deliveries.sender import Sender, SendResult
from deliveries.services.claims import Claimed, deliveries_give_back
from deliveries.services.recording import Outcome, Recorded, Recorder
from deliveries.signing import payload_bytes, webhook_headers
from webhooks.services.endpoints import endpoint_signing_secrets

logger = logging.getLogger(__name__)

# Deliveries one claim takes at most. Each claim, load and recorder transaction has a
# fixed cost, so larger batches are cheaper per delivery: measured with `make bench`
# (2 workers, one endpoint), 50 drained ~1,290/s and 100 ~1,350-1,430/s; 150 no better.
BATCH_SIZE = 100
# Attempts in flight at once in one worker process. Sends wait on the network, not
# the CPU; past this the dispatcher waits before claiming more (backpressure).
SEND_THREADS = 400
# Attempts one endpoint may have in flight in one worker process: a hanging endpoint
# holds at most half of the sending threads, and a healthy one still gets 4,000
# deliveries/s at 50 ms per round trip.
ENDPOINT_MAX_IN_FLIGHT = 200
# Claims skip an endpoint with this many in flight, so one batch never takes it past
# its cap: deliveries claimed only to be given back cost two writes each.
ENDPOINT_CLAIM_CEILING = ENDPOINT_MAX_IN_FLIGHT - BATCH_SIZE
# A claim waits until at least this many sending threads are free.
MIN_RESERVATION = 10
# Keep-alive connections kept per receiving host (more are opened when needed).
ENDPOINT_CONNECTIONS = 16


class Pipeline:
    """The process's sending threads, its recorder and its count of attempts in flight,
    in all and per endpoint."""

    def __init__(self) -> None:
        self.sender = Sender(
            version=VERSION,
            allow_private_networks=settings.HOMING_ALLOW_PRIVATE_NETWORKS,
            maxsize=ENDPOINT_CONNECTIONS,
        )
        self.pool = ThreadPoolExecutor(max_workers=SEND_THREADS, thread_name_prefix="homing-send")
        self.recorder = Recorder()
        self._reserved = 0
        self._per_endpoint: Counter[str] = Counter()
        self._changed = threading.Condition()
        # Called when a skipped endpoint drops below the claim ceiling (the dispatcher).
        self.on_endpoint_room: Callable[[], None] = lambda: None

    def reserve(self, wanted: int) -> int:
        """Wait for room, then reserve up to `wanted` attempts; returns how many."""
        enough = min(wanted, MIN_RESERVATION)  # not a claim per freed thread when busy
        with self._changed:
            self._changed.wait_for(lambda: SEND_THREADS - self._reserved >= enough)
            granted = min(wanted, SEND_THREADS - self._reserved)
            self._reserved += granted
            return granted

    def admit(self, claimed: list[Claimed], reserved: int) -> tuple[list[Claimed], list[Claimed]]:
        """Split claimed deliveries into those to send now and those over their
        endpoint's cap; frees the reservations not used."""
        admitted, excess = [], []
        with self._changed:
            for delivery in claimed:
                if self._per_endpoint[delivery.endpoint_id] < ENDPOINT_MAX_IN_FLIGHT:
                    self._per_endpoint[delivery.endpoint_id] += 1
                    admitted.append(delivery)
                else:
                    excess.append(delivery)
            self._reserved -= reserved - len(admitted)
            self._changed.notify_all()
        return admitted, excess

    def done(self, endpoint_id: str) -> None:
        with self._changed:
            self._reserved -= 1
            self._per_endpoint[endpoint_id] -= 1
            in_flight = self._per_endpoint[endpoint_id]
            if not in_flight:
                del self._per_endpoint[endpoint_id]
            self._changed.notify_all()
        if in_flight == ENDPOINT_CLAIM_CEILING - 1:
            self.on_endpoint_room()

    def busy_endpoints(self) -> set[str]:
        """Endpoints a claim should skip: one more batch could take them past the cap."""
        with self._changed:
            return {e for e, n in self._per_endpoint.items() if n >= ENDPOINT_CLAIM_CEILING}

    def cancel(self, reserved: int) -> None:
        with self._changed:
            self._reserved -= reserved
            self._changed.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until every attempt under way is recorded (for a graceful shutdown)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._reserved == 0, timeout=timeout)


@functools.cache
def pipeline() -> Pipeline:
    return Pipeline()


def attempts_start(*, claimed: list[Claimed], reserved: int, policy: Policy) -> int:
    """Send the claimed deliveries from the sending threads, within their endpoint's cap
    and rate limit (the others are given back). `reserved` places were reserved for
    them. Returns how many attempts were started; the recorder writes their outcomes."""
    line = pipeline()
    admitted, excess = line.admit(claimed, reserved)
    if excess:
        deliveries_give_back(delivery_ids=[c.id for c in excess])
    try:
        started = _within_rate_limits(admitted, line)
    except BaseException:
        # Their leases expire and the scheduler retries them; free their places here.
        for delivery in admitted:
            line.done(delivery.endpoint_id)
        raise
    for delivery in started:
        line.pool.submit(_send_and_record, delivery, policy)
    return len(started)


def _within_rate_limits(deliveries: list[Claimed], line: Pipeline) -> list[Claimed]:
    """Those that may be sent this second; the others are given back for the next one."""
    now = time.time()
    verdict = rate_limits.allowed(
        endpoint_ids=[d.endpoint_id for d in deliveries],
        limits={d.endpoint_id: d.endpoint.rate_limit for d in deliveries if d.endpoint.rate_limit},
        second=int(now),
    )
    throttled = [d for d, ok in zip(deliveries, verdict, strict=True) if not ok]
    if throttled:
        deliveries_give_back(
            delivery_ids=[d.id for d in throttled],
            delay=timedelta(seconds=math.ceil(now) - now + 0.01),
        )
        for delivery in throttled:
            line.done(delivery.endpoint_id)
    return [d for d, ok in zip(deliveries, verdict, strict=True) if ok]


def _send_and_record(delivery: Claimed, policy: Policy) -> Future[Recorded | None]:
    line = pipeline()
    started_at = timezone.now()
    result = _send(delivery, policy=policy, sender=line.sender)
    recorded = line.recorder.submit(Outcome(delivery, result, started_at, policy))
    recorded.add_done_callback(lambda _: line.done(delivery.endpoint_id))
    return recorded


def _send(delivery: Claimed, *, policy: Policy, sender: Sender) -> SendResult | None:
    """The attempt's result, or None when the endpoint was deactivated since the claim.

    Never raises: whatever happens, the claim gets a result to record, and the
    process's count of attempts in flight goes down again.
    """
    if not delivery.endpoint.is_active:
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
            **delivery.endpoint.headers,
            **webhook_headers(
                msg_id=event.id,
                timestamp=int(time.time()),
                body=body,
                secrets=endpoint_signing_secrets(endpoint=delivery.endpoint),
            ),
        }
        return sender.send(
            url=delivery.endpoint.url, body=body, headers=headers, timeout=policy.timeout
        )
    except Exception as exc:  # a bug (e.g. a corrupt secret) must not strand the claim
        logger.exception(
            "sending delivery %s failed unexpectedly",
            delivery.id,
            extra=delivery_log_context(delivery),
        )
        return SendResult(None, f"internal error: {type(exc).__name__}", b"", None, 0)


def event_timestamp(created_at: datetime) -> str:
    return created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
