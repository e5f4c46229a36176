"""Endpoint health: failures counted, the circuit opens, probes, closes; long failure
deactivates; operational events reach the endpoints that ask for them, and no other."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deliveries.lifecycle.endpoint_backlogs import endpoint_backlog_clear
from deliveries.lifecycle.interventions import endpoint_deactivate
from deliveries.lifecycle.policy import current_policy
from deliveries.lifecycle.recording import Attempted, attempts_record
from deliveries.models import Delivery
from deliveries.results import ErrorKind, SendResult
from deliveries.worker.claims import deliveries_claim
from tests.factories import endpoint_id_via_api
from webhooks.models import Endpoint, Event

DOWN = SendResult.failed(ErrorKind.CONNECTION, "connection error: refused")
OK = SendResult(200, None, b"ok", None, 5)


@pytest.fixture(autouse=True)
def small_thresholds(settings):
    settings.HOMING_CIRCUIT_FAILURES = 3
    settings.HOMING_CIRCUIT_PROBE_INTERVAL = 30
    settings.HOMING_DEACTIVATE_AFTER = 3600


def send(actor, n: int, event_type: str = "order.paid") -> None:
    for i in range(n):
        actor.client.post("/api/v1/events", {"type": event_type, "data": {"n": i}}, format="json")


def claim(limit: int = 50):
    return deliveries_claim(limit=limit, policy=current_policy())


def record(claimed, result: SendResult, endpoint_id: str | None = None):
    return attempts_record(
        outcomes=[
            Attempted(d, result, timezone.now(), current_policy())
            for d in claimed
            if endpoint_id is None or d.endpoint_id == endpoint_id
        ]
    )


def make_due() -> None:
    Delivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())


def homing_events(event_type: str) -> list[Event]:
    return list(Event.objects.filter(type=event_type))


def test_it_opens_the_circuit_after_consecutive_failures_and_stops_claiming(alice) -> None:
    down = endpoint_id_via_api(alice, "http://127.0.0.1:9/down", event_types=["order.*"])
    watcher = endpoint_id_via_api(alice, "http://127.0.0.1:9/watch", event_types=["homing.*"])
    everything = endpoint_id_via_api(alice, "http://127.0.0.1:9/all")
    send(alice, 5)
    claimed = claim()
    to_down = [d for d in claimed if d.endpoint_id == down]
    record(to_down[:2], DOWN)
    shown = alice.client.get(f"/api/v1/endpoints/{down}").json()
    assert shown["circuit_state"] == "closed" and shown["consecutive_failures"] == 2
    assert shown["failing_since"] is not None

    record(to_down[2:], DOWN)  # the rest of its 5: 5 consecutive failures
    record(claimed, OK, everything)
    shown = alice.client.get(f"/api/v1/endpoints/{down}").json()
    assert shown["circuit_state"] == "open" and shown["consecutive_failures"] == 5

    [opened] = homing_events("homing.endpoint.circuit_opened")
    assert opened.data["endpoint_id"] == down and opened.data["url"].endswith("/down")
    assert opened.data["failing_since"] == shown["failing_since"].replace("+00:00", "Z")
    # Only the endpoint that names homing.* gets it: not `[]`, not the one it is about.
    assert [d.endpoint_id for d in opened.deliveries.all()] == [watcher]

    make_due()
    assert {d.endpoint_id for d in claim()} == {watcher}  # its waiting deliveries are left alone
    assert Delivery.objects.filter(endpoint_id=down, status="pending").count() == 5


def test_it_probes_once_per_interval_and_closes_on_success(alice) -> None:
    down = endpoint_id_via_api(alice, "http://127.0.0.1:9/down")
    send(alice, 4)
    record(claim(), DOWN)
    assert Endpoint.objects.get(pk=down).circuit_state == "open"
    make_due()
    assert claim() == []  # not yet time to probe

    Endpoint.objects.filter(pk=down).update(probe_at=timezone.now() - timedelta(seconds=1))
    [probe] = claim()
    assert Endpoint.objects.get(pk=down).circuit_state == "half_open"
    assert claim() == []  # one probe at a time, whoever claims

    record([probe], DOWN)  # a failed probe keeps it open for another interval
    assert Endpoint.objects.get(pk=down).circuit_state == "open"
    make_due()
    assert claim() == []

    Endpoint.objects.filter(pk=down).update(probe_at=timezone.now() - timedelta(seconds=1))
    [probe] = claim()
    record([probe], OK)
    health = Endpoint.objects.get(pk=down)
    assert (health.circuit_state, health.consecutive_failures, health.failing_since) == (
        "closed",
        0,
        None,
    )
    assert len(homing_events("homing.endpoint.recovered")) == 1
    make_due()
    assert len(claim()) == 3  # the backlog flows again


def test_it_deactivates_an_endpoint_failing_for_the_configured_time(alice, settings) -> None:
    settings.HOMING_CIRCUIT_FAILURES = 100
    down = endpoint_id_via_api(alice, "http://127.0.0.1:9/down", event_types=["order.*"])
    watcher = endpoint_id_via_api(
        alice, "http://127.0.0.1:9/watch", event_types=["homing.endpoint.disabled"]
    )
    send(alice, 2)
    claimed = [d for d in claim() if d.endpoint_id == down]
    record(claimed[:1], DOWN)
    since = timezone.now() - timedelta(hours=2)
    Endpoint.objects.filter(pk=down).update(failing_since=since)
    [recorded] = record(claimed[1:], DOWN)
    assert recorded.deactivate_endpoint == down
    assert recorded.deactivate_reason.startswith("failing since ")

    assert endpoint_deactivate(endpoint_id=down, reason=recorded.deactivate_reason)
    shown = alice.client.get(f"/api/v1/endpoints/{down}").json()
    assert shown["is_active"] is False
    assert shown["disabled_reason"] == recorded.deactivate_reason
    [disabled] = homing_events("homing.endpoint.disabled")
    assert disabled.data["reason"] == recorded.deactivate_reason
    assert [d.endpoint_id for d in disabled.deliveries.all()] == [watcher]

    # Re-activating clears its health.
    alice.client.patch(f"/api/v1/endpoints/{down}", {"is_active": True}, format="json")
    shown = alice.client.get(f"/api/v1/endpoints/{down}").json()
    assert (shown["disabled_reason"], shown["failing_since"], shown["consecutive_failures"]) == (
        None,
        None,
        0,
    )


def test_a_flapping_endpoint_is_not_deactivated(alice, settings) -> None:
    down = endpoint_id_via_api(alice, "http://127.0.0.1:9/flaps")
    send(alice, 2)
    first, second = claim()
    record([first], DOWN)
    Endpoint.objects.filter(pk=down).update(failing_since=timezone.now() - timedelta(hours=2))
    [recorded] = record([second], OK)
    assert recorded.deactivate_endpoint is None
    assert Endpoint.objects.get(pk=down).failing_since is None


def test_a_fatal_answer_starts_failing_since_but_not_the_circuit_count(alice) -> None:
    """CONTRACT section 4: the circuit counts retryable failures only, while deactivation
    counts from the first failure of any kind after the last success. So a 404 shows a
    `failing_since` beside 0 `consecutive_failures` (the pages say what each means)."""
    lost = endpoint_id_via_api(alice, "http://127.0.0.1:9/lost")
    send(alice, 3)
    first, second, third = claim()
    not_found = SendResult(404, None, b"no such hook", None, 1)
    [recorded] = record([first], not_found)
    shown = alice.client.get(f"/api/v1/endpoints/{lost}").json()
    assert (shown["circuit_state"], shown["consecutive_failures"]) == ("closed", 0)
    assert shown["failing_since"] is not None
    assert recorded.deactivate_endpoint is None

    # Still no success an hour later: the 404s alone deactivate it, from that time.
    since = timezone.now() - timedelta(hours=2)
    Endpoint.objects.filter(pk=lost).update(failing_since=since)
    [recorded] = record([second], not_found)
    assert recorded.deactivate_endpoint == lost
    assert recorded.deactivate_reason == f"failing since {since.isoformat().replace('+00:00', 'Z')}"

    # One success clears both.
    record([third], OK)
    healthy = Endpoint.objects.get(pk=lost)
    assert (healthy.consecutive_failures, healthy.failing_since) == (0, None)


def test_a_410_gives_its_reason(alice) -> None:
    gone = endpoint_id_via_api(alice, "http://127.0.0.1:9/gone")
    send(alice, 1)
    [recorded] = record(claim(), SendResult(410, None, b"", None, 1))
    assert recorded.deactivate_reason == "HTTP 410 Gone"
    endpoint_deactivate(endpoint_id=gone, reason=recorded.deactivate_reason)
    assert Endpoint.objects.get(pk=gone).disabled_reason == "HTTP 410 Gone"


def test_a_dead_delivery_is_announced_but_a_dead_operational_one_is_not(alice) -> None:
    broken = endpoint_id_via_api(
        alice, "http://127.0.0.1:9/broken", event_types=["order.*", "homing.*"]
    )
    watcher = endpoint_id_via_api(
        alice, "http://127.0.0.1:9/watch", event_types=["homing.delivery.dead"]
    )
    send(alice, 1)
    record([d for d in claim() if d.endpoint_id == broken], SendResult(400, None, b"", None, 1))
    [dead] = homing_events("homing.delivery.dead")
    assert dead.data["endpoint_id"] == broken and dead.data["event_type"] == "order.paid"
    assert [d.endpoint_id for d in dead.deliveries.all()] == [watcher]

    # The watcher's own delivery of that news fails for good: nothing more is emitted.
    [news] = [d for d in claim() if d.endpoint_id == watcher]
    record([news], SendResult(400, None, b"", None, 1))
    assert len(homing_events("homing.delivery.dead")) == 1
    assert Endpoint.objects.get(pk=watcher).consecutive_failures == 0


def test_tenants_cannot_send_operational_events(alice) -> None:
    answer = alice.client.post(
        "/api/v1/events", {"type": "homing.endpoint.disabled", "data": {}}, format="json"
    )
    assert answer.status_code == 400


def test_metrics_count_open_circuits(alice, client, settings, monkeypatch) -> None:
    endpoint_id_via_api(alice, "http://127.0.0.1:9/down")
    send(alice, 3)
    record(claim(), DOWN)
    settings.HOMING_METRICS_TOKEN = ""
    # The process keeps its gauges a moment: an earlier test's scrape is not this one's.
    monkeypatch.setattr("config.gauges.CACHE_SECONDS", 0)
    body = client.get("/metrics").content.decode()
    assert "homing_open_circuits 1" in body


def test_a_recovered_endpoint_starts_with_a_few_in_flight(alice, settings) -> None:
    from deliveries.worker import concurrency

    settings.HOMING_ENDPOINT_CONCURRENCY = 50
    down = endpoint_id_via_api(alice, "http://127.0.0.1:9/down")
    send(alice, 4)
    record(claim(), DOWN)
    Endpoint.objects.filter(pk=down).update(probe_at=timezone.now() - timedelta(seconds=1))
    make_due()
    record(claim(), OK)  # the probe succeeds
    verdict = concurrency.acquire(
        endpoint_ids=[down] * 5, delivery_ids=[f"x{i}" for i in range(5)], lease_seconds=60
    )
    assert sum(verdict) == 2


def test_probing_an_endpoint_deleted_meanwhile_sends_nothing_and_crashes_nothing(alice) -> None:
    down = endpoint_id_via_api(alice, "http://127.0.0.1:9/down")
    send(alice, 4)
    record(claim(), DOWN)
    Endpoint.objects.filter(pk=down).update(probe_at=timezone.now() - timedelta(seconds=1))
    make_due()
    [probe] = claim()
    assert alice.client.delete(f"/api/v1/endpoints/{down}").status_code == 204
    record([probe], OK)  # the delivery is still there until the job removes it
    assert claim() == []
    endpoint_backlog_clear(endpoint_id=down)
    assert not Delivery.objects.filter(endpoint_id=down).exists()
    assert record([probe], OK) == [None]  # its delivery went with it: nothing recorded


def test_successes_of_a_healthy_endpoint_reset_its_failures_without_locking_it(alice) -> None:
    endpoint_id = endpoint_id_via_api(alice, "http://127.0.0.1:9/h")
    send(alice, 4)
    record(claim(2), DOWN)  # two failures: still closed
    make_due()
    claimed = claim(2)  # claims read the endpoint table (is_active) but lock deliveries only
    with CaptureQueriesContext(connection) as queries:
        record(claimed, OK)
    healthy = Endpoint.objects.get(pk=endpoint_id)
    assert (healthy.circuit_state, healthy.consecutive_failures, healthy.failing_since) == (
        "closed",
        0,
        None,
    )
    # Recorders of every worker would queue on a row lock of a busy endpoint.
    assert not [q for q in queries.captured_queries if "FOR UPDATE" in q["sql"] and
                "webhooks_endpoint" in q["sql"]]  # fmt: skip


def test_a_probe_leaves_the_rest_of_the_claim_to_other_endpoints(alice) -> None:
    down = endpoint_id_via_api(alice, "http://127.0.0.1:9/down", event_types=["order.*"])
    healthy = endpoint_id_via_api(alice, "http://127.0.0.1:9/ok", event_types=["invoice.*"])
    send(alice, 3)
    record(claim(), DOWN)
    assert Endpoint.objects.get(pk=down).circuit_state == "open"
    send(alice, 5, "invoice.paid")
    make_due()
    Endpoint.objects.filter(pk=down).update(probe_at=timezone.now() - timedelta(seconds=1))
    # The probe took one of the three: two are left for the healthy endpoint (the probe
    # used to be subtracted twice, and a claim of two took the probe alone).
    claimed = [d.endpoint_id for d in claim(limit=3)]
    assert sorted(claimed) == sorted([down, healthy, healthy])
