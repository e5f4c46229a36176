"""The operator commands, run as an operator runs them: `python manage.py ...` in a
subprocess against the test database; what they print and what they change."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from deliveries.models import Attempt, Delivery
from dlq.models import DeadLetter
from tests.factories import delivery_row, endpoint_row
from tests.processes import ROOT, process_env
from webhooks.models import Event
from webhooks.services.tenants import tenant_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=process_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def acme():
    tenant, _ = tenant_create(name="Acme")
    return tenant


@pytest.mark.parametrize("command", ["stats", "send_test_event", "replay_dead_letters", "purge"])
def test_it_documents_each_command(command):
    result = manage(command, "--help")
    assert result.returncode == 0 and "usage:" in result.stdout


def test_stats_json_counts_the_queue(acme):
    ep = endpoint_row(acme)
    delivery_row(ep, "succeeded")
    delivery_row(ep, "pending")
    delivery_row(ep, "pending")
    delivery_row(ep, "dead", dead_letter="waiting")
    delivery_row(ep, "dead", dead_letter="replayed")

    result = manage("stats", "--json")

    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["deliveries"] == {
        "pending": 2,
        "held": 0,  # waiting in an ordering key's line
        "delivering": 0,
        "succeeded": 1,
        "dead": 2,
    }
    assert stats["dead_letters"] == 1 and stats["due_now"] == 2
    assert stats["open_circuits"] == 0
    assert stats["oldest_dead_letter_age_seconds"] >= 0
    [failing] = stats["failing_endpoints"]
    assert failing == {"endpoint_id": ep.id, "url": ep.url, "retrying": 2, "dead_letters": 1}


def test_stats_prints_a_readable_summary(acme):
    delivery_row(endpoint_row(acme), "dead", dead_letter="waiting")

    result = manage("stats")

    assert result.returncode == 0, result.stderr
    assert "deliveries" in result.stdout and "dead 1" in result.stdout
    assert "dead letters    1 waiting" in result.stdout


def test_send_test_event_queues_a_homing_test_delivery(acme):
    ep = endpoint_row(acme, event_types=["order.*"])

    result = manage("send_test_event", ep.id)

    assert result.returncode == 0, result.stderr
    event = Event.objects.get(type="homing.test")
    assert event.data == {"test": True}
    [made] = Delivery.objects.filter(event=event)
    assert made.endpoint_id == ep.id and made.id in result.stdout


@pytest.mark.parametrize("active", [True, False])
def test_send_test_event_refuses_unknown_or_inactive_endpoints(acme, active):
    ep_id = endpoint_row(acme, is_active=False).id if not active else "ep_nope"

    result = manage("send_test_event", ep_id)

    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert not Event.objects.exists()


def test_replay_refuses_without_a_filter(acme):
    delivery_row(endpoint_row(acme), "dead", dead_letter="waiting")

    result = manage("replay_dead_letters")

    assert result.returncode == 2 and "--all" in result.stderr
    assert Delivery.objects.get().status == "dead"


@pytest.mark.parametrize(
    "args", [["--tenant", "ten_nope"], ["--endpoint", "ep_nope"], ["--since", "yesterday"]]
)
def test_replay_refuses_bad_input_and_changes_nothing(acme, args):
    delivery_row(endpoint_row(acme), "dead", dead_letter="waiting")

    result = manage("replay_dead_letters", *args)

    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert DeadLetter.objects.get().replayed_at is None


def test_replay_dry_run_counts_and_changes_nothing(acme):
    ep = endpoint_row(acme)
    delivery_row(ep, "dead", dead_letter="waiting")
    delivery_row(ep, "dead", dead_letter="waiting")

    result = manage("replay_dead_letters", "--endpoint", ep.id, "--dry-run")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "2"
    assert set(Delivery.objects.values_list("status", flat=True)) == {"dead"}


def test_replay_replays_only_the_matching_dead_letters(acme):
    orders, invoices = endpoint_row(acme), endpoint_row(acme)
    mine = delivery_row(orders, "dead", dead_letter="waiting", event_type="order.paid")
    other_type = delivery_row(orders, "dead", dead_letter="waiting", event_type="order.refunded")
    other_endpoint = delivery_row(invoices, "dead", dead_letter="waiting", event_type="order.paid")

    result = manage(
        "replay_dead_letters",
        "--endpoint",
        orders.id,
        "--event-type",
        "order.paid",
        "--since",
        "2020-01-01",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "1"
    statuses = dict(Delivery.objects.values_list("id", "status"))
    assert statuses == {mine.id: "pending", other_type.id: "dead", other_endpoint.id: "dead"}
    assert DeadLetter.objects.get(delivery=mine).replayed_at is not None


def test_replay_all_replays_every_waiting_dead_letter(acme, bob_tenant):
    delivery_row(endpoint_row(acme), "dead", dead_letter="waiting")
    delivery_row(endpoint_row(bob_tenant), "dead", dead_letter="waiting")

    result = manage("replay_dead_letters", "--all")

    assert result.stdout.splitlines()[-1] == "2"
    assert not DeadLetter.objects.filter(replayed_at__isnull=True).exists()


@pytest.fixture
def bob_tenant():
    tenant, _ = tenant_create(name="Bob")
    return tenant


def test_purge_removes_only_old_finished_events(acme):
    ep = endpoint_row(acme)
    gone = [
        delivery_row(ep, "succeeded", age_days=40, attempts=2),
        delivery_row(ep, "dead", age_days=40, dead_letter="replayed"),
    ]
    kept = [
        delivery_row(ep, "dead", age_days=40, dead_letter="waiting"),  # waits in the queue
        delivery_row(ep, "pending", age_days=40),
        delivery_row(ep, "succeeded", age_days=2),  # younger than the retention
    ]

    dry = manage("purge", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Would purge" in dry.stdout and "2 events, 2 deliveries, 3 attempts" in dry.stdout
    assert Delivery.objects.count() == 5

    result = manage("purge")

    assert result.returncode == 0, result.stderr
    assert "Purged" in result.stdout and "2 events, 2 deliveries, 3 attempts" in result.stdout
    assert set(Delivery.objects.values_list("id", flat=True)) == {d.id for d in kept}
    assert set(Event.objects.values_list("id", flat=True)) == {d.event_id for d in kept}
    assert not Attempt.objects.filter(delivery_id__in=[d.id for d in gone]).exists()
    assert DeadLetter.objects.count() == 1


def test_purge_honours_homing_retention(acme):
    delivery_row(endpoint_row(acme), "succeeded", age_days=2)

    result = manage("purge", HOMING_RETENTION="1d")

    assert "1 events" in result.stdout and not Event.objects.exists()
