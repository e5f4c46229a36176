"""An endpoint's send settings (header values, secrets, auth, certificate) are resolved
once per claim batch, not per attempt (send_settings.py): a worker that keeps running
sends a changed header and a rotated secret from the next claim on."""

from __future__ import annotations

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook
from standardwebhooks.webhooks import WebhookVerificationError

from deliveries.worker.worker import Worker
from tests.factories import endpoint_via_api, event_via_api
from tests.receivers import Receiver


@pytest.fixture
def receiver():
    started = Receiver().start()
    yield started
    started.stop()


@pytest.mark.django_db(transaction=True)
def test_a_running_worker_sends_a_changed_header_and_a_rotated_secret(alice, receiver) -> None:
    endpoint = endpoint_via_api(alice, receiver.url, headers={"X-Team": "one"})
    url = f"/api/v1/endpoints/{endpoint['id']}"
    worker = Worker(capacity=20).start()
    try:
        event_via_api(alice, "a.b")
        [first] = receiver.wait_for(1, timeout=30)
        patched = alice.client.patch(url, {"headers": {"X-Team": "two"}}, format="json")
        assert patched.status_code == 200
        rotated = alice.client.post(f"{url}/rotate-secret")
        assert rotated.status_code == 200
        event_via_api(alice, "a.b")
        [_, second] = receiver.wait_for(2, timeout=30)
    finally:
        worker.stop()
        worker.drain(timeout=5)
        worker.close()
    assert (first.headers["x-team"], second.headers["x-team"]) == ("one", "two")
    new_secret = rotated.json()["secret"]
    StandardWebhook(new_secret).verify(second.body, second.headers)
    with pytest.raises(WebhookVerificationError):  # the first was signed before it existed
        StandardWebhook(new_secret).verify(first.body, first.headers)
