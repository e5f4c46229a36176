from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from homing_receiver import Deduplicator
from homing_receiver.django import DjangoStore, webhook_view


@webhook_view(secret=settings.HOMING_WEBHOOK_SECRET, deduplicator=Deduplicator(DjangoStore()))
def payment_events(request: HttpRequest, event: dict) -> HttpResponse:
    # The business effect. Deliberately not idempotent (no unique key): running this
    # twice for one event would leave two rows.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO payments_received (event_id, amount) VALUES (%s, %s)",
            [event["id"], event["data"]["amount"]],
        )
    return HttpResponse("paid")
