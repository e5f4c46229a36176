"""Deliveries claimed ahead wait in line at an endpoint that answers, and each answer
hands its slot straight to the next one: the cap holds, nothing is sent twice, and most
requests go without a claim between them."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from deliveries.worker import concurrency
from deliveries.worker.worker import Worker
from tests.backlogs import due_backlog
from tests.processes import wait_until
from tests.receivers import Answer, Receiver, most_at_once
from webhooks.services.endpoints import endpoint_create
from webhooks.services.tenants import tenant_create

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = 0.1  # seconds the receiver takes to answer
COUNT = 16


@pytest.fixture
def receiver():
    started = Receiver(lambda request, n: Answer(delay=SLOW)).start()
    yield started
    started.stop()


def test_an_answer_hands_its_slot_to_the_next_delivery_in_line(
    settings, receiver, monkeypatch
) -> None:
    settings.HOMING_ENDPOINT_CONCURRENCY = 2
    handed = []
    hand_over = concurrency.hand_over

    def counted(**kwargs):
        handed.extend(kwargs["handed"])
        hand_over(**kwargs)

    monkeypatch.setattr(concurrency, "hand_over", counted)
    tenant, _ = tenant_create(name="Line")
    endpoint = endpoint_create(tenant=tenant, url=receiver.url)
    due_backlog(tenant, endpoint, COUNT)
    worker = Worker(capacity=20).start()
    try:
        requests = receiver.wait_for(COUNT, timeout=30)
        wait_until(
            lambda: Delivery.objects.filter(status="succeeded").count() == COUNT,
            timeout=10,
            message="not every delivery was recorded",
        )
    finally:
        worker.stop()
        worker.drain(timeout=5)
        worker.close()
    assert len({r.headers["webhook-id"] for r in requests}) == len(requests) == COUNT
    # The cap holds at the receiver (each request holds a connection SLOW seconds from
    # its arrival, minus a little as the answer leaves just before the next arrives).
    assert most_at_once([r.at for r in requests], SLOW - 0.02) <= 2
    # Only the first claim finds no answering endpoint: after it, answers hand over.
    assert len(handed) >= COUNT // 2
    assert {(endpoint_id, finished) for endpoint_id, finished, _ in handed} <= {
        (endpoint.id, d.id) for d in Delivery.objects.all()
    }
    assert concurrency.rooms(endpoint_ids=[endpoint.id]) == {endpoint.id: 2}
