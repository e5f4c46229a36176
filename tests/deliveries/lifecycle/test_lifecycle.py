"""Manual retries of a delivery in flight: one waiting chain however many clicks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from deliveries.lifecycle import interventions as lifecycle
from deliveries.models import Delivery


@pytest.fixture
def published(monkeypatch):
    """The Celery messages the retry chain would send (the broker is the edge here)."""
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(
        lifecycle,
        "publish_retry_when_free",
        lambda delivery_id, *, tries_left: sent.append((delivery_id, tries_left)),
    )
    return sent


@pytest.fixture
def in_flight(alice):
    alice.client.post("/api/v1/endpoints", {"url": "http://127.0.0.1:9/h"}, format="json")
    event = alice.client.post("/api/v1/events", {"type": "a.b", "data": {}}, format="json").json()
    Delivery.objects.update(
        status=Delivery.Status.DELIVERING,
        next_attempt_at=None,
        lease_expires_at=timezone.now() + timedelta(minutes=1),
    )
    return Delivery.objects.select_related("endpoint").get(pk=event["deliveries"][0]["id"])


def test_repeated_clicks_on_an_in_flight_delivery_start_one_chain(
    in_flight, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(5):
            lifecycle.delivery_retry_now(delivery=in_flight)
    assert published == [(in_flight.pk, lifecycle.RETRY_WAIT_TRIES)]


def test_a_click_after_the_chain_ended_starts_a_new_one(
    in_flight, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.delivery_retry_now(delivery=in_flight)
        lifecycle.delivery_retry_when_free(delivery_id=in_flight.pk, tries_left=0)  # gave up
        lifecycle.delivery_retry_now(delivery=in_flight)
    assert len(published) == 2


def test_the_chain_retries_once_the_attempt_is_recorded(
    in_flight, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.delivery_retry_now(delivery=in_flight)
        lifecycle.delivery_retry_when_free(delivery_id=in_flight.pk, tries_left=3)
        assert published[-1] == (in_flight.pk, 2)  # still in flight: ask again
        Delivery.objects.filter(pk=in_flight.pk).update(
            status=Delivery.Status.SUCCEEDED, lease_expires_at=None, attempt_count=1
        )
        lifecycle.delivery_retry_when_free(delivery_id=in_flight.pk, tries_left=2)
    delivery = Delivery.objects.get(pk=in_flight.pk)
    assert delivery.status == Delivery.Status.PENDING and delivery.next_attempt_at is not None
    # And a later click on the (now pending) delivery needs no chain at all.
    assert len(published) == 2
