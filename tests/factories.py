"""The one place that makes rows and API objects for tests.

Two kinds, named for how they make things:

- `*_via_api`: through the REST API with an actor's client (`tests/conftest.py:Actor`),
  as a tenant's backend would; they check the status code and return the JSON body or
  its id. Use them when the test is about what a user of the API sees.
- `*_row` and the others: rows made with the services or the ORM directly, in any state
  (a delivery already dead, a dead letter already replayed), for tests of the code that
  reads them.

Test modules import from here (and from conftest fixtures), never from each other:
`tests/test_test_layout.py` holds that rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import requests
from cryptography.fernet import Fernet
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from core.ids import id_at
from deliveries.intake.sequences import sequences_take
from deliveries.lifecycle.in_hand import in_hand_of
from deliveries.models import Attempt, Delivery
from dlq.models import DeadLetter
from dlq.services.dead_letters import dead_letters_create
from webhooks.models import Endpoint, Event, Tenant
from webhooks.services.endpoints import endpoint_create

if TYPE_CHECKING:
    from tests.conftest import Actor
    from tests.processes import Web

# The discard port: nothing listens, so a delivery to it fails at once. For tests that
# make endpoints but send nothing (or want every attempt to fail).
NOWHERE = "http://127.0.0.1:9/h"


# Through the API -------------------------------------------------------------------


def endpoint_via_api(actor: Actor, url: str = NOWHERE, **fields: Any) -> dict[str, Any]:
    """POST /api/v1/endpoints; the created endpoint as the API shows it (with its secret)."""
    response = actor.client.post("/api/v1/endpoints", {"url": url, **fields}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def endpoint_id_via_api(actor: Actor, url: str = NOWHERE, **fields: Any) -> str:
    return endpoint_via_api(actor, url, **fields)["id"]


def endpoint_via_api_with_lost_key(
    actor: Actor, settings: Any, url: str = NOWHERE, **fields: Any
) -> dict[str, Any]:
    """An endpoint whose secrets (and headers, filter, ... given in `fields`) were
    encrypted with a key HOMING_ENCRYPTION_KEY no longer holds: it changed without a
    rotation. `settings` is pytest-django's fixture; its keys are as they were after."""
    kept = settings.HOMING_ENCRYPTION_KEY
    settings.HOMING_ENCRYPTION_KEY = [Fernet.generate_key().decode()]  # then lost
    try:
        return endpoint_via_api(actor, url, **fields)
    finally:
        settings.HOMING_ENCRYPTION_KEY = kept


def endpoint_model_via_api(actor: Actor, url: str = NOWHERE, **fields: Any) -> Endpoint:
    """`endpoint_via_api`, read back as the model."""
    return Endpoint.objects.get(pk=endpoint_id_via_api(actor, url, **fields))


def endpoint_id_via_web(web: Web, key: str, url: str = NOWHERE, **fields: Any) -> str:
    """POST /api/v1/endpoints to one running web process (`tests.processes.Web`)."""
    status, body = web.call("POST", "/api/v1/endpoints", key=key, body={"url": url, **fields})
    assert status == 201, body
    return body["id"]


def event_via_api(
    actor: Actor, event_type: str = "payment.succeeded", data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """POST /api/v1/events; the accepted event with its deliveries."""
    response = actor.client.post(
        "/api/v1/events", {"type": event_type, "data": data or {"amount": 1}}, format="json"
    )
    assert response.status_code == 202, response.content
    return response.json()


def consumer_key_via_api(actor: Actor, owner: str) -> str:
    """POST /api/v1/consumer-keys; the key for `owner` (shown once)."""
    response = actor.client.post("/api/v1/consumer-keys", {"owner": owner}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["key"]


def api_client_for(key: str) -> APIClient:
    """Django REST framework's test client, authenticated with `key` (a tenant's or a
    consumer's)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def portal_link_via_api(actor: Actor, owner: str, **extra: Any) -> str:
    """POST /api/v1/portal-sessions with Django's test client; the portal link."""
    response = actor.client.post(
        "/api/v1/portal-sessions", {"owner": owner, **extra}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()["url"]


def portal_session_via_link(url: str, browser: Client | None = None) -> tuple[Client, Any]:
    """What portal.js does with a portal link: post its fragment to the exchange. The
    browser (a Django test client) and the exchange's answer."""
    browser = browser or Client()
    token = url.split("#", 1)[1]
    return browser, browser.post("/portal/session", {"link": token})


def portal_csrf_of(page: Any) -> str:
    """The portal form token on a page the portal answered."""
    match = re.search(r'name="portal_csrf" value="([0-9a-f]+)"', page.content.decode())
    assert match, "no portal form on the page"
    return match[1]


def portal_link_via_http(base: str, key: str, owner: str, **extra: object) -> str:
    """What a tenant's backend does: POST /api/v1/portal-sessions over HTTP to a live
    server at `base`."""
    answer = requests.post(
        f"{base}/api/v1/portal-sessions",
        json={"owner": owner, **extra},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    url = answer.json()["url"]
    assert url.startswith(f"{base}/portal/#")
    return url


def dead_letter_via_api(
    actor: Actor, endpoint_id: str, event_type: str = "order.paid", reason: str = "HTTP 404"
) -> DeadLetter:
    """An event posted through the API whose delivery to `endpoint_id` then died."""
    response = actor.client.post("/api/v1/events", {"type": event_type, "data": {}}, format="json")
    assert response.status_code == 202, response.content
    delivery = Delivery.objects.get(event_id=response.json()["id"], endpoint_id=endpoint_id)
    return dead_letter_of(delivery, reason)


# Rows --------------------------------------------------------------------------------


def endpoint_row(tenant: Tenant, url: str = NOWHERE, **fields: Any) -> Endpoint:
    """An endpoint made by the service the API calls (fields checked, secret encrypted)."""
    return endpoint_create(tenant=tenant, url=url, **fields)


def delivery_of(event: dict[str, Any]) -> Delivery:
    """The row of the first delivery of an event the API accepted."""
    return Delivery.objects.get(pk=event["deliveries"][0]["id"])


def dead_letter_of(delivery: Delivery, reason: str) -> DeadLetter:
    """Kill `delivery` (three attempts made) and file its dead letter, as the recorder
    does when an attempt was the last."""
    Delivery.objects.filter(pk=delivery.pk).update(
        status="dead", next_attempt_at=None, attempt_count=3
    )
    delivery.refresh_from_db()
    dead_letters_create(deliveries=[in_hand_of(delivery)], reasons=[reason], dead_at=timezone.now())
    return DeadLetter.objects.get(delivery=delivery, replayed_at__isnull=True)


def event_aged(event_id: str, *, days: float) -> str:
    """Make an event `days` old as if it had come in then: its created_at and its id (the
    id's time is what partitions go by), its deliveries following; the new id."""
    at = timezone.now() - timedelta(days=days)
    aged = id_at("evt", int(at.timestamp() * 1000))
    event = Event.objects.get(pk=event_id)
    Event.objects.create(
        id=aged,
        tenant_id=event.tenant_id,
        type=event.type,
        data=event.data,
        ordering_key=event.ordering_key,
        trace_context=event.trace_context,
    )
    Event.objects.filter(pk=aged).update(created_at=at)
    Delivery.objects.filter(event_id=event_id).update(event_id=aged)
    Event.objects.filter(pk=event_id).delete()
    return aged


def delivery_row(
    ep: Endpoint,
    status: str = "succeeded",
    *,
    age_days: float = 0,
    attempts: int = 1,
    event_type: str = "order.paid",
    dead_letter: str | None = None,
    made_ms: int | None = None,
) -> Delivery:
    """A delivery in `status` with its event and attempts, the event `age_days` old;
    dead_letter: None, "waiting", or "replayed"; made_ms: the event's and delivery's ids
    made at that millisecond (the partition they live in), not now."""
    now = timezone.now()
    if age_days and made_ms is None:  # ids of their time too (partitions go by them)
        made_ms = int((now - timedelta(days=age_days)).timestamp() * 1000)
    ids = {} if made_ms is None else {"id": id_at("evt", made_ms)}
    event = Event.objects.create(tenant=ep.tenant, type=event_type, data={"n": 1}, **ids)
    if made_ms is not None:
        ids = {"id": id_at("dlv", made_ms + 1)}  # a millisecond after its event, as intake
    made = Delivery.objects.create(
        **ids,
        tenant=ep.tenant,
        event=event,
        endpoint=ep,
        status=status,
        attempt_count=attempts,
        next_attempt_at=now if status == "pending" else None,
        lease_expires_at=now + timedelta(minutes=1) if status == "delivering" else None,
        last_error="HTTP 503" if status in ("pending", "dead") and attempts else "",
        sequence=sequences_take([ep.pk])[0],
    )
    for number in range(1, attempts + 1):
        Attempt.objects.create(delivery=made, number=number, started_at=now, status_code=503)
    if dead_letter:
        DeadLetter.objects.create(
            tenant=ep.tenant,
            delivery=made,
            event=event,
            endpoint=ep,
            event_type=event_type,
            reason="HTTP 503 after 9 attempts",
            dead_at=now,
            replayed_at=now if dead_letter == "replayed" else None,
        )
    if age_days:
        Event.objects.filter(pk=event.pk).update(created_at=now - timedelta(days=age_days))
    return made


def history_dropped(*, delivery_ids: Sequence[str] = (), event_ids: Sequence[str] = ()) -> None:
    """What retention's DROP of a partition does to these rows: gone, with their attempts,
    no ORM and no cascade (raw SQL; dead letters stay, as their foreign keys hold nothing)."""
    tables = {
        "attempt": Attempt._meta.db_table,
        "delivery": Delivery._meta.db_table,
        "event": Event._meta.db_table,
    }
    with connection.cursor() as cursor:
        for table, column, ids in (
            ("attempt", "delivery_id", delivery_ids),
            ("delivery", "id", delivery_ids),
            ("event", "id", event_ids),
        ):
            if ids:
                cursor.execute(f"DELETE FROM {tables[table]} WHERE {column} = ANY(%s)", [list(ids)])
