"""Replaying dead letters: the delivery starts a fresh retry schedule, same webhook-id."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import transaction
from django.db.models import F

from core import tracing
from core.clock import database_now
from core.exceptions import HomingError
from deliveries.intake.backpressure import work_admit, work_admitted
from deliveries.models import Delivery
from deliveries.wakeups import publish_deliveries_on_commit
from dlq.models import DeadLetter
from dlq.services.kept_history import history_restore
from webhooks.models import Event


class NotReplayable(HomingError):
    status_code = 409


def dead_letter_replay(*, dead_letter: DeadLetter) -> None:
    """Replay one dead letter, or raise NotReplayable saying why and change nothing."""
    if dead_letter.discarded_at is not None:
        raise NotReplayable("This dead letter was discarded.")
    if dead_letter.replayed_at is not None:
        raise NotReplayable("This dead letter was already replayed.")
    if not dead_letter.endpoint.is_active:
        raise NotReplayable("The endpoint is deactivated; activate it, then replay.")
    # Counted like an event (CONTRACT section 2): 429 while the tenant's backlog is full.
    work_admit(tenant_id=dead_letter.tenant_id)
    if dead_letters_replay(dead_letters=[dead_letter], one=dead_letter) != 1:
        # Another replay or a manual retry got there first: say where the delivery is.
        status = (
            Delivery.objects.filter(pk=dead_letter.delivery_id)
            .values_list("status", flat=True)
            .first()
        )
        if status is None:  # retention dropped it before dead letters kept their history
            raise NotReplayable("Not replayed: its delivery and event are past retention.")
        raise NotReplayable(
            f"Not replayed: the delivery is already {status} (replayed or retried meanwhile)."
        )
    work_admitted(tenant_id=dead_letter.tenant_id, deliveries=1)


@transaction.atomic
def dead_letters_replay(
    *, dead_letters: Iterable[DeadLetter], one: DeadLetter | None = None
) -> int:
    """Replay each dead letter whose delivery is still dead and whose endpoint is active;
    returns how many were replayed. With tracing on, in a span of its own (`one`: the
    replay of that one letter, a child of its event's trace)."""
    if tracing.tracer is None:
        return _replay(dead_letters)
    with _replay_span(one) as span:
        replayed = _replay(dead_letters)
        span.set_attribute("homing.replayed", replayed)
        return replayed


@contextlib.contextmanager
def _replay_span(one: DeadLetter | None) -> Iterator[Any]:
    assert tracing.tracer is not None
    parent: str | None = None
    attributes: dict[str, Any] = {}
    if one is not None:
        # The context the letter kept: its event may be gone (retention dropped it). A
        # letter kept from before asks the event.
        parent = one.event_trace_context or (
            Event.objects.filter(pk=one.event_id).values_list("trace_context", flat=True).first()
        )
        attributes = tracing.attributes_of(
            tenant_id=one.tenant_id,
            endpoint_id=one.endpoint_id,
            event_id=one.event_id,
            delivery_id=one.delivery_id,
            dead_letter_id=one.pk,
        )
    with tracing.tracer.start_as_current_span(
        "dead letter replay",
        context=tracing.parent_of(parent),
        attributes=attributes,
    ) as span:
        yield span


def _replay(dead_letters: Iterable[DeadLetter]) -> int:
    now = database_now()
    replayed: dict[str, str] = {}  # delivery id -> dead letter id
    letters = [
        letter
        for letter in dead_letters
        if letter.replayed_at is None and letter.discarded_at is None and letter.endpoint.is_active
    ]
    # Retention may have dropped their event and delivery rows: back they come, `dead`.
    history_restore(letters=letters)
    for letter in letters:
        # A fresh schedule: attempts count from here on, the first one due now. The
        # status condition makes two concurrent replays of one letter one replay.
        updated = Delivery.objects.filter(
            pk=letter.delivery_id, status=Delivery.Status.DEAD
        ).update(
            status=Delivery.Status.PENDING,
            next_attempt_at=now,
            schedule_offset=F("attempt_count"),
            last_error="",
            updated_at=now,
            # Out of its ordering key's line: its death let the next one go already.
            ordering_key=None,
            head_since=None,
        )
        if updated:
            replayed[letter.delivery_id] = letter.pk
    # Every waiting dead letter of a replayed delivery is settled, not only the one named.
    DeadLetter.objects.filter(delivery_id__in=replayed, replayed_at__isnull=True).update(
        replayed_at=now
    )
    publish_deliveries_on_commit(list(replayed))
    return len(replayed)
