"""Deliveries reach the apps above them through signals (deliveries/signals.py)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from deliveries.models import Delivery
from deliveries.signals import deliveries_died, deliveries_died_send
from dlq.services.dead_letters import deliveries_died_received


def test_the_dead_letter_queue_receives_deaths(db):
    answered = deliveries_died.send(
        sender=Delivery, deliveries=[], reasons=[], dead_at=timezone.now()
    )
    assert [receiver for receiver, _ in answered] == [deliveries_died_received]


def test_a_death_nobody_receives_is_an_error_not_a_lost_dead_letter():
    deliveries_died.disconnect(dispatch_uid="dlq.dead_letters")
    try:
        with pytest.raises(RuntimeError, match="dlq"):
            deliveries_died_send(deliveries=[], reasons=[], dead_at=timezone.now())
    finally:
        deliveries_died.connect(deliveries_died_received, dispatch_uid="dlq.dead_letters")
