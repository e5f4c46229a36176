from __future__ import annotations

import json
import re
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from core import counters
from core.exceptions import IdempotencyKeyInUse
from tests.factories import endpoint_via_api
from webhooks.models import Event, IdempotencyRecord

BODY = {"type": "payment.succeeded", "data": {"amount": 4200, "currency": "EUR"}}


def post(actor, payload=BODY, key="order-1234", client=None):
    client = client or actor.client
    return client.post(
        "/api/v1/events",
        json.dumps(payload),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


@pytest.fixture
def endpoint(alice):
    endpoint_via_api(alice)


def test_a_repeat_replays_the_first_answer_byte_for_byte(alice, endpoint):
    first = post(alice)
    again = post(alice)
    assert first.status_code == again.status_code == 202
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Event.objects.count() == 1
    assert counters.read_all().get("idempotency_replays") == 1


def test_key_order_and_whitespace_do_not_make_a_different_body(alice, endpoint):
    first = post(alice)
    reordered = alice.client.post(
        "/api/v1/events",
        '{ "data": {"currency": "EUR", "amount": 4200}, "type": "payment.succeeded"}',
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="order-1234",
    )
    assert reordered.status_code == 202 and reordered.content == first.content


def test_the_same_key_with_another_body_is_422(alice, endpoint):
    post(alice)
    response = post(alice, {"type": "payment.succeeded", "data": {"amount": 1}})
    assert response.status_code == 422
    assert "different request body" in response.json()["message"]
    assert Event.objects.count() == 1
    assert counters.read_all().get("idempotency_conflicts") == 1


def test_keys_are_scoped_to_the_tenant(alice, bob, endpoint):
    post(alice)
    response = post(bob)
    assert response.status_code == 202 and "Idempotent-Replayed" not in response
    assert Event.objects.count() == 2


def test_a_key_still_being_processed_is_409(alice, endpoint):
    now = timezone.now()
    IdempotencyRecord.objects.create(
        tenant=alice.tenant,
        key="order-1234",
        request_hash=_fingerprint(),
        created_at=now,
        expires_at=now + timedelta(hours=24),
    )
    response = post(alice)
    assert response.status_code == 409
    assert "still being processed" in response.json()["message"]
    assert Event.objects.count() == 0


def _processing_since(alice, since):
    return IdempotencyRecord.objects.create(
        tenant=alice.tenant,
        key="order-1234",
        request_hash=_fingerprint(),
        created_at=since,
        expires_at=since + timedelta(hours=24),
    )


def test_a_request_that_may_still_run_is_not_taken_over(alice, endpoint):
    # Two minutes exceeds gunicorn's 30 s timeout, but a gthread worker's request can
    # outlive it: taking the key over then would create a second event.
    _processing_since(alice, timezone.now() - timedelta(minutes=2))
    assert post(alice).status_code == 409
    assert Event.objects.count() == 0


def test_stale_processing_exceeds_the_web_timeout():
    from webhooks.services.idempotency import STALE_PROCESSING

    procfile = (Path(__file__).resolve().parents[2] / "Procfile").read_text()
    given = re.search(r"--timeout[= ](\d+)", procfile)
    web_timeout = int(given.group(1)) if given else 30  # gunicorn's default
    assert STALE_PROCESSING.total_seconds() > 2 * web_timeout


def test_a_request_taken_over_while_running_rolls_back(alice, endpoint):
    from webhooks.services.idempotency import idempotent_call

    def produce():
        Event.objects.create(tenant=alice.tenant, type="a.b", data={})
        # Meanwhile another request judged ours stale and took the key over.
        IdempotencyRecord.objects.filter(key="k").update(created_at=timezone.now())
        return 202, b"{}"

    with pytest.raises(IdempotencyKeyInUse):
        idempotent_call(tenant=alice.tenant, key="k", fingerprint="f", produce=produce)
    assert Event.objects.count() == 0


def test_a_request_that_died_mid_way_can_be_retried_after_five_minutes(alice, endpoint):
    long_ago = timezone.now() - timedelta(minutes=6)
    IdempotencyRecord.objects.create(
        tenant=alice.tenant,
        key="order-1234",
        request_hash=_fingerprint(),
        created_at=long_ago,
        expires_at=long_ago + timedelta(hours=24),
    )
    assert post(alice).status_code == 202
    assert Event.objects.count() == 1


def test_a_key_is_forgotten_after_the_ttl(alice, endpoint, settings):
    post(alice)
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    again = post(alice)
    assert again.status_code == 202 and "Idempotent-Replayed" not in again
    assert Event.objects.count() == 2


def test_the_purge_command_deletes_expired_records(alice, endpoint):
    post(alice, key="old")
    post(alice, key="fresh")
    IdempotencyRecord.objects.filter(key="old").update(expires_at=timezone.now())
    call_command("purge_idempotency_keys")
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "é"])
def test_a_malformed_key_is_400(alice, endpoint, key):
    response = post(alice, key=key)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["errors"]
    assert Event.objects.count() == 0


def test_an_invalid_body_is_not_remembered(alice, endpoint):
    assert post(alice, {"data": {}}).status_code == 400
    assert IdempotencyRecord.objects.count() == 0
    assert post(alice).status_code == 202


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_identical_requests_create_one_event(alice, endpoint):
    barrier = threading.Barrier(20)
    responses = []

    def send() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.key}")
        barrier.wait()
        try:
            responses.append(post(alice, client=client))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert Event.objects.count() == 1
    codes = sorted(r.status_code for r in responses)
    assert len(codes) == 20 and set(codes) <= {202, 409}
    created = [r for r in responses if r.status_code == 202 and "Idempotent-Replayed" not in r]
    assert len(created) == 1
    for replay in (r for r in responses if r.status_code == 202):
        assert replay.content == created[0].content


def _fingerprint() -> str:
    from webhooks.services.idempotency import request_fingerprint

    return request_fingerprint(BODY)
