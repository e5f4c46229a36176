"""Dead letters outlive their history: what a letter keeps, and a replay after retention
dropped its event and delivery rows (simulated with raw SQL, as a DROP of their
partitions leaves them: no ORM, no cascade)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from deliveries.lifecycle.endpoint_backlogs import endpoint_backlog_clear
from deliveries.models import Delivery
from deliveries.transport.signing import payload_bytes
from deliveries.worker.attempt import event_timestamp
from dlq.models import DeadLetter
from tests.factories import (
    dead_letter_of,
    endpoint_id_via_api,
    history_dropped,
    portal_link_via_api,
    portal_session_via_link,
)
from tests.jobs import replays_at_once, run_replay_jobs
from webhooks.models import Endpoint, Event, Tenant
from webhooks.services.endpoints import endpoint_delete

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def body_of(event: Event) -> bytes:
    """The webhook body the worker builds from the event row (deliveries/worker/attempt.py)."""
    return payload_bytes(
        event_id=event.id,
        event_type=event.type,
        timestamp_iso=event_timestamp(event.created_at),
        data=event.data,
    )


def dead_letter_with_history(alice, endpoint: str) -> DeadLetter:
    """A dead letter of an event with data worth keeping byte for byte, an ordering key
    and a trace context."""
    response = alice.client.post(
        "/api/v1/events",
        {
            "type": "order.paid",
            "data": {"amount": 12.5, "zebra": [1, {"ä": "ü"}], "a": None, "nested": {"b": 1}},
            "ordering_key": "order-7",
        },
        format="json",
        HTTP_TRACEPARENT=TRACEPARENT,
    )
    assert response.status_code == 202, response.content
    delivery = Delivery.objects.get(event_id=response.json()["id"], endpoint_id=endpoint)
    return dead_letter_of(delivery, "HTTP 503 after 3 attempts")


def test_a_dead_letter_keeps_what_a_replay_needs(alice):
    endpoint = endpoint_id_via_api(alice)
    letter = dead_letter_with_history(alice, endpoint)
    delivery = Delivery.objects.get(pk=letter.delivery_id)
    event = Event.objects.get(pk=letter.event_id)

    assert letter.kept
    assert (letter.sequence, letter.attempt_count) == (delivery.sequence, 3)
    assert letter.delivery_created_at == delivery.created_at
    assert (letter.event_data, letter.event_created_at) == (event.data, event.created_at)
    assert letter.event_ordering_key == "order-7" == event.ordering_key
    assert letter.event_trace_context == event.trace_context
    assert TRACEPARENT in (letter.event_trace_context or "")


def test_replay_after_the_drop_recreates_the_event_and_delivery_as_they_were(alice):
    endpoint = endpoint_id_via_api(alice)
    endpoint_id_via_api(alice)  # a second endpoint: the event has two deliveries
    letter = dead_letter_with_history(alice, endpoint)
    event = Event.objects.get(pk=letter.event_id)
    delivery = Delivery.objects.get(pk=letter.delivery_id)
    body = body_of(event)
    history_dropped(
        delivery_ids=list(Delivery.objects.filter(event=event).values_list("pk", flat=True)),
        event_ids=[event.pk],
    )

    response = alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay")

    assert response.status_code == 202, response.content
    back = Delivery.objects.select_related("event").get(pk=delivery.pk)
    assert (back.status, back.sequence, back.endpoint_id) == (
        "pending",
        delivery.sequence,
        endpoint,
    )
    assert back.attempts_in_schedule == 0
    assert back.next_attempt_at is not None and back.next_attempt_at <= timezone.now()
    assert back.attempt_count == 3  # the next attempt is number 4: no number twice
    assert back.created_at == delivery.created_at
    assert body_of(back.event) == body  # the same body bytes, its timestamp included
    assert back.event.ordering_key == "order-7"
    assert back.event.trace_context == event.trace_context
    assert back.ordering_key is None  # out of its key's line, as any replay
    # Only the replayed delivery comes back; the other endpoint's stays gone.
    assert Delivery.objects.filter(event_id=event.pk).count() == 1
    letter.refresh_from_db()
    assert letter.replayed_at is not None
    assert alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay").status_code == 409


def test_replay_recreates_the_event_alone_when_only_its_partition_is_gone(alice):
    letter = dead_letter_with_history(alice, endpoint_id_via_api(alice))
    body = body_of(Event.objects.get(pk=letter.event_id))
    history_dropped(event_ids=[letter.event_id])

    assert alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay").status_code == 202

    back = Delivery.objects.select_related("event").get(pk=letter.delivery_id)
    assert back.status == "pending" and body_of(back.event) == body


def test_bulk_replay_and_the_command_recreate_dropped_history(alice):
    endpoint = endpoint_id_via_api(alice)
    by_job = [dead_letter_with_history(alice, endpoint) for _ in range(3)]
    by_command = dead_letter_with_history(alice, endpoint_id_via_api(alice))
    everything = [*by_job, by_command]
    history_dropped(
        delivery_ids=[x.delivery_id for x in everything],
        event_ids=[x.event_id for x in everything],
    )

    response = alice.client.post(
        "/api/v1/dead-letters/replay", {"endpoint": endpoint}, format="json"
    )
    assert response.status_code == 202 and response.json() == {"replayed": 3}
    run_replay_jobs()
    call_command("replay_dead_letters", endpoint=by_command.endpoint_id, stdout=None)

    for letter in everything:
        back = Delivery.objects.get(pk=letter.delivery_id)
        assert (back.status, back.sequence, back.event_id) == (
            "pending",
            letter.sequence,
            letter.event_id,
        )
    assert not DeadLetter.objects.filter(replayed_at__isnull=True).exists()


@pytest.mark.django_db(transaction=True)
def test_two_replays_of_one_dropped_letter_at_once_make_one_replay(alice):
    letter = dead_letter_with_history(alice, endpoint_id_via_api(alice))
    history_dropped(delivery_ids=[letter.delivery_id], event_ids=[letter.event_id])
    assert replays_at_once(letter) == ["refused", "replayed"]
    delivery = Delivery.objects.get(pk=letter.delivery_id)
    assert delivery.status == "pending" and delivery.attempts_in_schedule == 0
    assert Event.objects.filter(pk=letter.event_id).count() == 1


def test_a_letter_kept_from_before_without_history_is_refused_as_before(alice):
    letter = dead_letter_with_history(alice, endpoint_id_via_api(alice))
    DeadLetter.objects.filter(pk=letter.pk).update(event_created_at=None, sequence=None)
    history_dropped(delivery_ids=[letter.delivery_id], event_ids=[letter.event_id])

    response = alice.client.post(f"/api/v1/dead-letters/{letter.id}/replay")

    assert response.status_code == 409
    assert response.json()["message"] == "Not replayed: its delivery and event are past retention."
    assert not Delivery.objects.filter(pk=letter.delivery_id).exists()


def test_the_api_console_and_portal_show_a_letter_whose_history_is_gone(alice):
    endpoint = endpoint_id_via_api(alice, owner="acme")
    letter = dead_letter_with_history(alice, endpoint)
    before = alice.client.get("/api/v1/dead-letters").json()
    history_dropped(delivery_ids=[letter.delivery_id], event_ids=[letter.event_id])

    assert alice.client.get("/api/v1/dead-letters").json() == before
    assert [x["id"] for x in before["results"]] == [letter.id]

    olivia = User.objects.create_user("olivia", "o@example.com", "pw", is_staff=True)
    olivia.user_permissions.add(*Permission.objects.filter(codename="change_deadletter"))
    staff = Client()
    staff.force_login(olivia)
    queue = staff.get("/dead-letters/")
    assert queue.status_code == 200 and letter.id in queue.content.decode()
    page = staff.get(f"/deliveries/{letter.delivery_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert letter.event_id in html and "order.paid" in html and "data-dropped" in html
    assert "HTTP 503 after 3 attempts" in html and "Retry now" not in html

    consumer, _ = portal_session_via_link(portal_link_via_api(alice, "acme"))
    letters = consumer.get(f"/portal/endpoints/{endpoint}/dead-letters/")
    assert letters.status_code == 200 and letter.delivery_id in letters.content.decode()
    mine = consumer.get(f"/portal/deliveries/{letter.delivery_id}/")
    assert mine.status_code == 200 and letter.event_id in mine.content.decode()


def test_deleting_an_endpoint_or_a_tenant_deletes_its_dead_letters(alice, bob):
    endpoint = endpoint_id_via_api(alice)
    kept_apart = dead_letter_with_history(alice, endpoint_id_via_api(alice))
    for _ in range(3):
        dead_letter_with_history(alice, endpoint)
    bobs = endpoint_id_via_api(bob)
    dead_letter_with_history(bob, bobs)

    endpoint_delete(endpoint=Endpoint.objects.get(pk=endpoint))
    assert endpoint_backlog_clear(endpoint_id=endpoint)
    Tenant.objects.filter(pk=bob.tenant.pk).delete()

    assert list(DeadLetter.objects.values_list("pk", flat=True)) == [kept_apart.pk]
