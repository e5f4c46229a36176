"""The worker's job: claim due deliveries, send them in parallel, record the attempts.

No transaction or row lock is held across an HTTP call:
1. claim (claims.py): one conditional UPDATE takes due rows with a lease;
2. send: each attempt in a sending thread, bounded by HOMING_DELIVERY_TIMEOUT;
3. record (recording.py): the recorder thread writes results in batches.
The Celery task returns once its sends are under way, so a hanging endpoint holds a
sending thread, never a Celery worker slot. If the process dies meanwhile, the leases
expire and the scheduler retries those deliveries.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from config.version import VERSION
from deliveries import rate_limits
from deliveries.models import Delivery
from deliveries.policy import Policy, current_policy
from deliveries.sender import Sender, SendResult
from deliveries.services.claims import deliveries_claim, deliveries_give_back
from deliveries.services.recording import Outcome, Recorded, Recorder
from deliveries.signing import payload_bytes, webhook_headers
from webhooks.services.endpoints import endpoint_signing_secrets

logger = logging.getLogger(__name__)

# Deliveries one claim takes at most: enough to amortise the queries and the Celery
# message, small enough that several tasks share the work of a burst.
BATCH_SIZE = 50
# Attempts in flight at once in one worker process. Sends wait on the network, not
# the CPU; past this a task waits before claiming more (backpressure).
SEND_THREADS = 200
# Attempts one endpoint may have in flight in one worker process: a hanging endpoint
# holds at most half of the sending threads, and a healthy one still gets 2,000
# deliveries/s at 50 ms per round trip.
ENDPOINT_MAX_IN_FLIGHT = 100
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

    def reserve(self, wanted: int) -> int:
        """Wait for room, then reserve up to `wanted` attempts; returns how many."""
        with self._changed:
            self._changed.wait_for(lambda: self._reserved < SEND_THREADS)
            granted = min(wanted, SEND_THREADS - self._reserved)
            self._reserved += granted
            return granted

    def admit(self, claimed: list[tuple[str, str]], reserved: int) -> tuple[list[str], list[str]]:
        """Split claimed (delivery, endpoint) pairs into those to send now and those
        over their endpoint's cap; frees the reservations not used."""
        admitted, excess = [], []
        with self._changed:
            for delivery_id, endpoint_id in claimed:
                if self._per_endpoint[endpoint_id] < ENDPOINT_MAX_IN_FLIGHT:
                    self._per_endpoint[endpoint_id] += 1
                    admitted.append(delivery_id)
                else:
                    excess.append(delivery_id)
            self._reserved -= reserved - len(admitted)
            self._changed.notify_all()
        return admitted, excess

    def done(self, endpoint_id: str) -> None:
        with self._changed:
            self._reserved -= 1
            self._per_endpoint[endpoint_id] -= 1
            if not self._per_endpoint[endpoint_id]:
                del self._per_endpoint[endpoint_id]
            self._changed.notify_all()

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


def deliveries_attempt(*, delivery_ids: Sequence[str], take_more: bool = True) -> int:
    """Attempt these deliveries if due and free, plus (with `take_more`) other due ones up
    to a batch, so that a busy system claims in batches. Returns how many attempts were
    started; it does not wait for them (the recorder writes their outcomes)."""
    policy = current_policy()
    line = pipeline()
    reserved = line.reserve(BATCH_SIZE)
    try:
        claimed = deliveries_claim(
            delivery_ids=delivery_ids, limit=reserved, policy=policy, take_more=take_more
        )
    except BaseException:
        line.cancel(reserved)
        raise
    admitted, excess = line.admit(claimed, reserved)
    if excess:
        deliveries_give_back(delivery_ids=excess)
    if not admitted:
        return 0
    try:
        deliveries = list(
            Delivery.objects.filter(pk__in=admitted).select_related("event", "endpoint")
        )
    except BaseException:
        # Their leases expire and the scheduler retries them; free their places here.
        for delivery_id, endpoint_id in claimed:
            if delivery_id in admitted:
                line.done(endpoint_id)
        raise
    deliveries = _within_rate_limits(deliveries, line)
    for delivery in deliveries:
        line.pool.submit(_send_and_record, delivery, policy)
    return len(deliveries)


def _within_rate_limits(deliveries: list[Delivery], line: Pipeline) -> list[Delivery]:
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


def _send_and_record(delivery: Delivery, policy: Policy) -> Future[Recorded | None]:
    line = pipeline()
    started_at = timezone.now()
    result = _send(delivery, policy=policy, sender=line.sender)
    recorded = line.recorder.submit(Outcome(delivery, result, started_at, policy))
    recorded.add_done_callback(lambda _: line.done(delivery.endpoint_id))
    return recorded


def _send(delivery: Delivery, *, policy: Policy, sender: Sender) -> SendResult | None:
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
        logger.exception("sending delivery %s failed unexpectedly", delivery.id)
        return SendResult(None, f"internal error: {type(exc).__name__}", b"", None, 0)


def event_timestamp(created_at: datetime) -> str:
    return created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
