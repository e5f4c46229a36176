"""Staff replay dead letters from the admin (the web UI until the dedicated one exists)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from deliveries.models import Delivery
from dlq.models import DeadLetter
from tests.factories import dead_letter_via_api, endpoint_id_via_api


def test_staff_replay_selected_dead_letters_from_the_admin(alice):
    endpoint = endpoint_id_via_api(alice)
    fresh, already = dead_letter_via_api(alice, endpoint), dead_letter_via_api(alice, endpoint)
    DeadLetter.objects.filter(pk=already.pk).update(replayed_at=already.dead_at)
    staff = Client()
    staff.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))

    response = staff.post(
        "/admin/dlq/deadletter/",
        {"action": "replay", "_selected_action": [fresh.pk, already.pk]},
        follow=True,
    )

    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    assert shown == [
        "Replayed 1 of 2.",
        "1 skipped: already replayed, no longer dead, or endpoint inactive.",
    ]
    fresh.refresh_from_db()
    assert fresh.replayed_at is not None
    delivery = Delivery.objects.get(pk=fresh.delivery_id)
    assert delivery.status == "pending" and delivery.schedule_offset == delivery.attempt_count
    assert Delivery.objects.get(pk=already.delivery_id).status == "dead"


def test_the_replay_action_needs_a_staff_login(alice):
    letter = dead_letter_via_api(alice, endpoint_id_via_api(alice))
    response = Client().post(
        "/admin/dlq/deadletter/", {"action": "replay", "_selected_action": [letter.pk]}
    )
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    letter.refresh_from_db()
    assert letter.replayed_at is None
