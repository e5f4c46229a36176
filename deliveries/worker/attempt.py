"""One attempt, on the sender's event loop: sign, send, hand the result to the recorder.

Its ledger entry moves as it goes: the request's end frees the endpoint place (or hands
it to the delivery next in line there, sent at once) and the record's end frees the
capacity slot. Every path out, an exception included, ends the entry once.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING

from core import tracing
from core.clock import database_time
from deliveries.lifecycle.policy import Policy
from deliveries.lifecycle.recording import Attempted
from deliveries.log_context import delivery_log_context
from deliveries.results import ErrorKind, SendResult
from deliveries.transport.sender import Sender
from deliveries.transport.signing import SEQUENCE_HEADER, payload_bytes, webhook_headers
from deliveries.worker.claims import Claimed
from deliveries.worker.ledger import Ledger
from deliveries.worker.pacing import Pacing
from deliveries.worker.recorder import Recorder

if TYPE_CHECKING:
    from opentelemetry.trace import Span


logger = logging.getLogger(__name__)

# A delivery claimed ahead that no answer took within this is given back: its lease must
# still cover a whole attempt when it starts.
NEXT_IN_LINE_SECONDS = 2.0
UNREADABLE_ERROR = (
    "cannot decrypt the endpoint's stored secrets: this worker's HOMING_ENCRYPTION_KEY lacks "
    "the key that encrypted them"
)


def _attempt_spans() -> ModuleType:
    """deliveries/worker/attempt_span.py, imported once tracing is on: with tracing off a
    worker loads no span code (DESIGN.md 26; tests/e2e/test_tracing_e2e.py)."""
    from deliveries.worker import attempt_span

    return attempt_span


class Attempts:
    def __init__(
        self,
        *,
        sender: Sender,
        ledger: Ledger[Claimed],
        recorder: Recorder,
        pacing: Pacing,
        stopping: threading.Event,
    ) -> None:
        self.sender = sender
        self._ledger = ledger
        self._recorder = recorder
        self._pacing = pacing
        self._stopping = stopping

    def start_in(self, delay: float, delivery: Claimed, policy: Policy) -> None:
        """From any thread: start the attempt on the event loop after `delay` seconds."""
        self.sender.loop.call_soon_threadsafe(self._start_in, delay, delivery, policy)

    def _start_in(self, delay: float, delivery: Claimed, policy: Policy) -> None:
        if delay > 0:
            self.sender.loop.call_later(delay, self._start, delivery, policy)
        else:
            self._start(delivery, policy)

    def _start(self, delivery: Claimed, policy: Policy) -> None:
        rate_limit = delivery.endpoint.rate_limit
        if rate_limit:
            early = self._pacing.too_early(
                delivery.endpoint_id, rate_limit, self.sender.loop.time()
            )
            if early > 0:
                self.sender.loop.call_later(early, self._start, delivery, policy)
                return
        self.sender.loop.create_task(self.run(delivery, policy))

    async def run(self, delivery: Claimed, policy: Policy) -> None:
        """Send one delivery and hand the result to the recorder; its entry ends once the
        result is recorded, or here if it never reaches the recorder."""
        submitted = False
        tracer = tracing.tracer  # None while tracing is off: no span is made
        spans = None if tracer is None else _attempt_spans()
        span = None if spans is None else spans.attempt_span_start(tracer, delivery)
        try:
            started_at = datetime.now(UTC)  # timezone.now() reads a setting: per attempt
            result = None
            try:
                result = await self.send(delivery, policy, span)
            finally:
                if spans is not None and span is not None:
                    spans.attempt_span_end(span, result)
                self._request_over(delivery, policy, answered=succeeded(result))
            self._recorder.submit(
                Attempted(delivery, result, started_at, policy),
                lambda _: self._ledger.finish(delivery),
            )
            submitted = True
        finally:
            if not submitted:
                self._ledger.finish(delivery)

    def _request_over(self, delivery: Claimed, policy: Policy, *, answered: bool) -> None:
        """After a success, the endpoint's place goes to the delivery next in line there,
        sent at once; after a failure (the endpoint's circuit may be opening) or while
        stopping (the drain gives the line back) it is free."""
        successor = self._ledger.request_over(
            delivery,
            answered=answered and not self._stopping.is_set(),
            max_wait=NEXT_IN_LINE_SECONDS,
        )
        if successor is not None:
            self._start(successor, policy)  # the settings' policy, as at its claim

    async def send(
        self, delivery: Claimed, policy: Policy, span: Span | None = None
    ) -> SendResult | None:
        """The attempt's result, or None when the endpoint was deactivated since the claim.
        `span`: the attempt's span while tracing is on (its `traceparent` goes along)."""
        endpoint = delivery.endpoint
        if not endpoint.is_active:
            return None
        send = delivery.send  # resolved once for the claim's batch (send_settings.py)
        if send is None:  # the claim gives these back; should one get through:
            logger.error(
                "delivery %s not sent: %s",
                delivery.id,
                UNREADABLE_ERROR,
                extra=delivery_log_context(delivery),
            )
            return SendResult.failed(ErrorKind.KEY, UNREADABLE_ERROR)
        if send.certificate_error is not None:
            return SendResult.failed(ErrorKind.TLS, send.certificate_error)
        try:
            event = delivery.event
            body = payload_bytes(
                event_id=event.id,
                event_type=event.type,
                timestamp_iso=event_timestamp(event.created_at),
                data=event.data,
            )
            headers = {
                **send.headers,
                **webhook_headers(
                    msg_id=event.id,
                    # The database's clock: a receiver checks it against true time.
                    timestamp=int(database_time(measure=False)),
                    body=body,
                    secrets=send.secrets,
                ),
                SEQUENCE_HEADER: str(delivery.sequence),
            }
            if span is not None:
                headers.update(_attempt_spans().attempt_span_headers(span))
            elif event.trace_context is not None:
                # Tracing off: the webhook carries the event's trace context as it came,
                # so the receiver still joins the producer's trace (CONTRACT section 3).
                headers.update(tracing.trace_headers(event.trace_context))
        except Exception as exc:  # a bug: fatal
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
            auth=send.auth,
            client_certificate=send.certificate,
        )
        if result.error_kind is ErrorKind.INTERNAL:
            logger.critical(
                "delivery %s: the sender failed (a bug): %s",
                delivery.id,
                result.error,
                extra=delivery_log_context(delivery),
            )
        return result


def succeeded(result: SendResult | None) -> bool:
    """A 2xx answer (CONTRACT section 4): the endpoint takes requests as fast as we send."""
    return result is not None and result.status_code is not None and 200 <= result.status_code < 300


def event_timestamp(created_at: datetime) -> str:
    return created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
