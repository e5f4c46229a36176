"""The relay: sends committed outbox rows to Homing, oldest first, exactly once each.

Exactly once rests on two things. Rows are claimed with SELECT ... FOR UPDATE SKIP
LOCKED inside the transaction that also marks them, so concurrent relays never hold
the same row. And each row is POSTed with Idempotency-Key = its id, so a relay that
dies after Homing committed the event but before its own mark committed sends the row
again on restart and gets Homing's first answer replayed instead of a second event.

Holding the row locks across the POSTs is deliberate, unlike Homing's own deliveries:
the lock is what keeps a second relay off a row while it is in flight, and a relay
that dies releases it the moment PostgreSQL sees its connection close, so a restart
resends at once instead of waiting out a lease. The transaction stays short: the
calls go to Homing (not to arbitrary endpoints), a batch stops at the first row Homing
cannot take, and no new row is sent once max_seconds have passed.

A row that Homing answers with 5xx for the client's whole retry_for is either the
victim of an outage (every row would get the same) or a row Homing cannot take (a bug
it triggers). Homing's /healthz tells the two apart: while it answers 200, Homing works
and the row is marked failed (kept, to send again from the admin) so that the rows
behind it go on; otherwise the row waits like when Homing is down. A 429 (backpressure)
leaves the row pending, and the relay waits at least the Retry-After before the next
try.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.db import DatabaseError, connections, router, transaction
from django.db.models import Min
from django.utils import timezone

from homing_client import Client, HomingError, HomingThrottled, HomingUnavailable
from homing_client.django.models import OutboxEvent
from homing_client.django.outbox import CHANNEL

logger = logging.getLogger("homing_client.relay")

# Answers about the relay, not the row: a wrong HOMING_API_KEY (401, 403), a wrong
# HOMING_URL (404, 405) or a rate limit (429). Failing rows on them would burn the whole
# outbox on one configuration mistake, so the rows wait like when Homing is down.
NOT_ABOUT_THE_ROW = frozenset({401, 403, 404, 405, 429})


class _Notifying(Protocol):
    """psycopg 3's connection, as far as waiting for NOTIFY goes (psycopg is optional)."""

    def notifies(
        self, *, timeout: float | None = None, stop_after: int | None = None
    ) -> Iterator[Any]: ...


@dataclass
class BatchResult:
    claimed: int = 0
    sent: int = 0
    failed: int = 0
    # Rows left for later: an earlier row of their ordering key is another relay's now.
    deferred: int = 0
    # Why Homing could not be reached; the rows from there on stay pending.
    unavailable: str | None = None
    # Seconds Homing asked the relay to wait before the next try (a 429's Retry-After).
    retry_after: float | None = None

    def drained(self, batch_size: int) -> bool:
        """Nothing was left pending: fewer rows than asked for, and every one handled."""
        handled = self.sent + self.failed + self.deferred
        return self.claimed < batch_size and handled == self.claimed


def client_from_settings() -> Client:
    """A Client for HOMING_URL / HOMING_API_KEY that gives up quickly.

    The relay holds its claimed rows' locks while it sends, so a short retry_for hands
    control back to its own backoff instead of waiting a minute per row.
    """
    return Client(
        settings.HOMING_URL,
        settings.HOMING_API_KEY,
        timeout=getattr(settings, "HOMING_TIMEOUT", 10),
        retry_for=getattr(settings, "HOMING_RELAY_RETRY_FOR", 5),
    )


def outbox_relay_batch(
    *,
    client: Client,
    batch_size: int = 100,
    max_seconds: float = 10,
    using: str | None = None,
) -> BatchResult:
    """Claim up to batch_size pending rows, send each one, and mark them; one transaction.

    Rows not reached within max_seconds stay pending (unlocked at commit) for the next
    batch, so a slow Homing cannot keep the transaction open for long.
    """
    alias = using or router.db_for_write(OutboxEvent)
    result = BatchResult()
    deadline = time.monotonic() + max_seconds
    with transaction.atomic(using=alias):
        rows = list(
            OutboxEvent.objects.using(alias)
            .filter(status=OutboxEvent.Status.PENDING)
            .order_by("created_at", "id")
            .select_for_update(skip_locked=True)[:batch_size]
        )
        result.claimed = len(rows)
        rows = _in_key_order(rows)
        behind_others = _rows_behind_other_relays(rows, alias)
        for row in rows:
            if time.monotonic() > deadline:
                break
            if row.id in behind_others:
                result.deferred += 1
                continue
            row.attempts += 1
            try:
                event = client.publish(
                    row.type, row.data, idempotency_key=row.id, ordering_key=row.ordering_key
                )
            except HomingError as error:
                row.last_error = str(error)[:2000]
                if _refused_by_a_working_homing(error, client):
                    row.last_error = (
                        f"{row.last_error} (for {client.retry_for:g}s, while Homing's "
                        "/healthz answered 200)"
                    )[:2000]
                elif isinstance(error, HomingUnavailable) or error.status in NOT_ABOUT_THE_ROW:
                    row.save(update_fields=["attempts", "last_error"])
                    result.unavailable = row.last_error
                    if isinstance(error, HomingThrottled):
                        result.retry_after = error.retry_after
                    # Stop here rather than skip: later rows must not overtake this one.
                    break
                # Refused for good (400, 413, 422...): sending it again cannot help.
                row.status = OutboxEvent.Status.FAILED
                row.save(update_fields=["attempts", "status", "last_error"])
                result.failed += 1
                logger.error("Homing refused outbox row %s (%s): %s", row.id, row.type, error)
            else:
                row.status = OutboxEvent.Status.SENT
                row.sent_at = timezone.now()
                row.event_id = str(event.get("id", ""))
                row.last_error = ""
                row.save(update_fields=["attempts", "status", "sent_at", "event_id", "last_error"])
                result.sent += 1
    return result


def _in_key_order(rows: list[OutboxEvent]) -> list[OutboxEvent]:
    """The batch with each ordering key's rows in key_sequence (commit) order, in the
    places its rows had; rows without a key stay where they are."""
    by_key: dict[str, list[OutboxEvent]] = {}
    for row in rows:
        if row.ordering_key is not None:
            by_key.setdefault(row.ordering_key, []).append(row)
    queues = {
        key: iter(sorted(keyed, key=lambda r: r.key_sequence or 0)) for key, keyed in by_key.items()
    }
    return [row if row.ordering_key is None else next(queues[row.ordering_key]) for row in rows]


def _rows_behind_other_relays(rows: list[OutboxEvent], alias: str) -> set[str]:
    """Ids of the rows here that come after a pending row of their key that this batch
    does not hold (another relay's, in flight; SKIP LOCKED can leave such a gap inside a
    batch too): they wait, so that a key's rows never overtake each other."""
    keys = {row.ordering_key for row in rows if row.ordering_key is not None}
    if not keys:
        return set()
    others_first = dict(
        OutboxEvent.objects.using(alias)
        .filter(status=OutboxEvent.Status.PENDING, ordering_key__in=keys)
        .exclude(pk__in=[row.id for row in rows])
        .values("ordering_key")
        .annotate(first=Min("key_sequence"))
        .values_list("ordering_key", "first")
    )
    return {
        row.id
        for row in rows
        if row.ordering_key in others_first
        and (row.key_sequence or 0) > others_first[row.ordering_key]
    }


def _refused_by_a_working_homing(error: HomingError, client: Client) -> bool:
    """5xx answers for the whole retry_for while Homing's health check says it works."""
    server_error = isinstance(error, HomingUnavailable) and (error.status or 0) >= 500
    return server_error and client.healthy()


def outbox_relay_pending(
    *,
    client: Client | None = None,
    batch_size: int = 100,
    max_seconds: float = 50,
    using: str | None = None,
) -> BatchResult:
    """Send batches until nothing is pending, Homing is unreachable or time is up.

    The one-shot form, for a periodic Celery task or cron.
    """
    client = client or client_from_settings()
    total = BatchResult()
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline:
        batch = outbox_relay_batch(client=client, batch_size=batch_size, using=using)
        total.claimed += batch.claimed
        total.sent += batch.sent
        total.failed += batch.failed
        total.unavailable = batch.unavailable
        if batch.unavailable or batch.drained(batch_size):
            break
    return total


class Relay:
    """The long-running loop of ``manage.py homing_relay``.

    Woken by the NOTIFY that publish_on_commit sends in the caller's transaction (on
    PostgreSQL with psycopg 3), so rows leave within milliseconds of their commit;
    polls every poll_interval seconds as the safety net (other databases, a missed
    notification). stop() ends it after the batch in hand.
    """

    def __init__(
        self,
        *,
        client: Client | None = None,
        batch_size: int = 100,
        batch_seconds: float = 10.0,
        poll_interval: float = 5.0,
        max_backoff: float = 30.0,
        using: str | None = None,
    ) -> None:
        self.client = client or client_from_settings()
        self.batch_size = batch_size
        self.batch_seconds = batch_seconds
        self.poll_interval = poll_interval
        self.max_backoff = max_backoff
        self.alias = using or router.db_for_write(OutboxEvent)
        self.stopping = threading.Event()
        self._listening_on: _Notifying | None = None

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            try:
                self._listen()
                result = outbox_relay_batch(
                    client=self.client,
                    batch_size=self.batch_size,
                    max_seconds=self.batch_seconds,
                    using=self.alias,
                )
            except DatabaseError as error:
                logger.warning("Outbox database error, retrying: %s", error)
                self._reset_connection()
                failures += 1
                self.stopping.wait(self._backoff(failures))
                continue
            if result.sent or result.failed:
                logger.info("Relayed %d outbox row(s), %d refused", result.sent, result.failed)
            if result.unavailable:
                failures += 1
                delay = max(self._backoff(failures), result.retry_after or 0.0)
                logger.warning(
                    "Homing cannot take rows (%s); they stay pending, next try in %.1fs",
                    result.unavailable,
                    delay,
                )
                self.stopping.wait(delay)
                continue
            failures = 0
            if result.drained(self.batch_size):
                self._wait_for_commit()

    def _backoff(self, failures: int) -> float:
        return min(self.max_backoff, 0.5 * 2 ** (failures - 1)) * random.uniform(0.5, 1.0)

    def _raw_connection(self) -> _Notifying | None:
        connection = connections[self.alias]
        if connection.vendor != "postgresql":
            return None
        connection.ensure_connection()
        raw = connection.connection
        # psycopg 3 can wait for notifications; with psycopg2 the relay only polls.
        return raw if hasattr(raw, "notifies") else None

    def _listen(self) -> None:
        raw = self._raw_connection()
        if raw is not None and raw is not self._listening_on:
            with connections[self.alias].cursor() as cursor:
                cursor.execute(f"LISTEN {CHANNEL}")
            self._listening_on = raw

    def _wait_for_commit(self) -> None:
        deadline = time.monotonic() + self.poll_interval
        raw = self._listening_on
        while not self.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if raw is None:
                self.stopping.wait(remaining)
                return
            try:
                # Short slices so that stop() is honoured within a second.
                for _ in raw.notifies(timeout=min(remaining, 1.0), stop_after=1):
                    return
            except Exception as error:
                logger.warning("Lost the outbox notification channel: %s", error)
                self._reset_connection()
                return

    def _reset_connection(self) -> None:
        self._listening_on = None
        with contextlib.suppress(DatabaseError):
            connections[self.alias].close()
