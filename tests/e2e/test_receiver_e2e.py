"""Homing delivers to a customer's Django app that uses the receiver library.

The app (tests/e2e/payments_app) runs under gunicorn as its own server, on the test
database, and records each payment as a row in payments_received.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.db import connection
from homing_receiver import Webhook
from homing_receiver.django.models import ProcessedWebhook

from deliveries.models import Delivery
from tests.factories import endpoint_via_api
from tests.harness import free_port
from tests.processes import Process, wait_until

pytestmark = pytest.mark.e2e

# gunicorn's access log, one line per request with the status the sender really got
# (after the middleware) and the webhook-id it sent.
ACCESS_LOG_FORMAT = "access %(m)s %(U)s %(s)s webhook-id=%({webhook-id}i)s"
ACCESS_LINE = re.compile(r"access POST /webhooks/homing/ (\d{3}) webhook-id=(\S+)")


class PaymentsApp:
    """The customer's receiver. Its URL is known first; it starts once the secret is."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.address = f"127.0.0.1:{free_port()}"
        self.url = f"http://{self.address}/webhooks/homing/"
        self.process: Process | None = None

    def start(self, secret: str) -> None:
        self.process = Process(
            "payments_app",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "tests.e2e.payments_app.wsgi",
                "--bind",
                self.address,
                "--workers",
                "2",
                "--access-logfile",
                "-",
                "--access-logformat",
                ACCESS_LOG_FORMAT,
            ],
            self.log_dir,
            DJANGO_SETTINGS_MODULE="tests.e2e.payments_app.settings",
            HOMING_WEBHOOK_SECRET=secret,
            LOST_RESPONSE_MARKER=str(self.log_dir / "lost-one-response"),
        )
        wait_until(self._listening, timeout=20, message=f"payments app down:\n{self.log()}")

    def _listening(self) -> bool:
        try:
            httpx.get(self.url, timeout=1)  # 405: webhook_view is POST-only
        except httpx.TransportError:
            return False
        return True

    def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return httpx.post(self.url, content=body, headers=headers, timeout=5)

    def access_log(self) -> list[tuple[int, str]]:
        return [(int(status), wid) for status, wid in ACCESS_LINE.findall(self.log())]

    def log(self) -> str:
        return self.process.log() if self.process else ""


@pytest.fixture
def payments_table(transactional_db: None) -> Iterator[None]:
    # transactional_db: the app's own connections must see the table and our reads
    # must see its rows, so nothing may sit in an uncommitted test transaction.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE payments_received (event_id text, amount int)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE payments_received")


@pytest.fixture
def payments_app(payments_table: None, tmp_path: Path, request) -> Iterator[PaymentsApp]:
    app = PaymentsApp(tmp_path)
    yield app
    if app.process is not None:
        app.process.stop()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(f"----- payments_app log -----\n{app.log()[-5000:]}")


def payments_received() -> list[tuple[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT event_id, amount FROM payments_received ORDER BY event_id")
        return cursor.fetchall()


def test_a_lost_response_is_retried_and_the_payment_recorded_once(
    alice, homing, payments_app, settings
):
    settings.HOMING_RETRY_SCHEDULE = "1s,2s,4s"
    endpoint = endpoint_via_api(alice, payments_app.url)
    payments_app.start(endpoint["secret"])
    homing("worker")
    homing("scheduler")

    response = alice.client.post(
        "/api/v1/events", {"type": "payment.succeeded", "data": {"amount": 4200}}, format="json"
    )
    assert response.status_code == 202
    event = response.json()
    delivery_id = event["deliveries"][0]["id"]

    wait_until(lambda: Delivery.objects.get(pk=delivery_id).status == "succeeded", timeout=20)
    detail = alice.client.get(f"/api/v1/deliveries/{delivery_id}").json()
    assert detail["attempt_count"] == 2
    assert [attempt["status_code"] for attempt in detail["attempts"]] == [500, 200]

    # The first attempt ran the view and then "lost" its answer; the retry was
    # answered from the dedup record without running the view again.
    assert payments_received() == [(event["id"], 4200)]
    assert ProcessedWebhook.objects.get(key=event["id"]).state == "done"
    wait_until(lambda: len(payments_app.access_log()) == 2, timeout=5)
    assert payments_app.access_log() == [(500, event["id"]), (200, event["id"])]
    assert f"Skipped duplicate webhook {event['id']}: already processed" in payments_app.log()


def test_an_unsigned_or_tampered_request_is_rejected_and_records_nothing(alice, payments_app):
    endpoint = endpoint_via_api(alice, payments_app.url)
    payments_app.start(endpoint["secret"])
    body = json.dumps({"id": "msg_forged", "type": "payment.succeeded", "data": {"amount": 1}})
    timestamp = int(time.time())
    signed = {
        "webhook-id": "msg_forged",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": Webhook(endpoint["secret"]).sign("msg_forged", timestamp, body),
        "content-type": "application/json",
    }
    unsigned = {key: value for key, value in signed.items() if key != "webhook-signature"}
    tampered_body = body.replace('"amount": 1', '"amount": 1000000').encode()

    for sent_body, headers in [(body.encode(), unsigned), (tampered_body, signed)]:
        response = payments_app.post(sent_body, headers)
        assert response.status_code == 400, response.text

    assert payments_received() == []
    assert not ProcessedWebhook.objects.exists()
    log = payments_app.log()
    assert "Rejected webhook: Missing required header(s): webhook-signature" in log
    assert "Rejected webhook: No matching signature found" in log
