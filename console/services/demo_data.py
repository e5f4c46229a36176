"""Demo data for the console and its benchmark: tenants, endpoints, events, deliveries,
attempts, dead letters and the per-minute aggregate, loaded with PostgreSQL COPY.

Idempotent by topping up: demo tenants and endpoints have fixed ids, and each run adds
only the dead letters and attempts still missing to reach the numbers asked for.
Seeded deliveries are finished (succeeded or dead), so a running worker sends nothing.
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from deliveries.models import Attempt, AttemptMinute, Delivery
from deliveries.signing import generate_secret
from dlq.models import DeadLetter
from webhooks.models import Endpoint, Event, Tenant

TENANTS = {
    "ten_demo_acme": ("Acme Shop", ["shop.acme.example", "erp.acme.example"]),
    "ten_demo_globex": ("Globex Payments", ["api.globex.example", "ledger.globex.example"]),
    "ten_demo_initech": ("Initech CRM", ["hooks.initech.example"]),
    "ten_demo_umbrella": ("Umbrella Logistics", ["track.umbrella.example", "ops.umbrella.example"]),
    "ten_demo_hooli": ("Hooli Cloud", ["events.hooli.example"]),
    "ten_demo_stark": ("Stark Energy", ["grid.stark.example", "billing.stark.example"]),
}
EVENT_TYPES = [
    "order.paid",
    "order.refunded",
    "invoice.sent",
    "customer.updated",
    "shipment.delivered",
]
DAYS = 7  # history spread over the last week, denser in the last hours (the chart)
CHUNK = 20_000  # rows per COPY round trip and progress line


@dataclass
class SeedReport:
    dead_letters: int
    attempts: int
    events: int
    deliveries: int


def _demo_id(prefix: str, at: datetime) -> str:
    """Shaped like core.ids.new_id, but timed at `at`, so id order is time order."""
    millis = int(at.timestamp() * 1000).to_bytes(6, "big")
    return f"{prefix}_{base64.b32encode(millis + os.urandom(10)).decode().rstrip('=').lower()}"


def _ts(at: datetime) -> str:
    return at.isoformat()


def demo_setup() -> dict[str, list[Endpoint]]:
    """The demo tenants and their endpoints (fixed ids), created once."""
    endpoints: dict[str, list[Endpoint]] = {}
    for tenant_id, (name, hosts) in TENANTS.items():
        tenant, _ = Tenant.objects.get_or_create(id=tenant_id, defaults={"name": name})
        endpoints[tenant_id] = []
        for n, host in enumerate(hosts):
            endpoint, _ = Endpoint.objects.get_or_create(
                id=f"ep_demo_{tenant_id[9:]}_{n}",
                defaults={
                    "tenant": tenant,
                    "url": f"https://{host}/webhooks/homing",
                    "description": f"{name} {'primary' if n == 0 else 'secondary'} receiver",
                    "event_types": [] if n == 0 else ["order.*", "invoice.*"],
                    "secret": generate_secret(),
                },
            )
            endpoints[tenant_id].append(endpoint)
    return endpoints


def _moment(now: datetime, rng: random.Random) -> datetime:
    # 40 % in the last 6 hours (a lively chart), the rest over the week.
    if rng.random() < 0.4:
        return now - timedelta(seconds=rng.uniform(60, 6 * 3600))
    return now - timedelta(seconds=rng.uniform(6 * 3600, DAYS * 86400))


def _payload(event_type: str, rng: random.Random) -> str:
    n = rng.randrange(10_000, 99_999)
    data = {
        "id": f"{event_type.split('.')[0]}_{n}",
        "amount": rng.randrange(500, 250_000),
        "currency": rng.choice(["EUR", "USD", "GBP"]),
        "customer": {"id": f"cus_{n * 7 % 100_000}", "email": f"customer{n}@example.com"},
        "lines": [{"sku": f"SKU-{rng.randrange(100, 999)}", "qty": rng.randrange(1, 5)}],
    }
    return json.dumps(data, separators=(",", ":"))


class _Batch:
    """Rows of the four tables, written with COPY when big enough."""

    def __init__(self) -> None:
        self.events, self.deliveries, self.attempts, self.letters = (
            io.StringIO() for _ in range(4)
        )
        self.rows = 0

    def flush(self) -> None:
        raw = connection.connection  # the psycopg connection under Django's wrapper
        with raw.cursor() as cursor:
            for table, columns, buffer in [
                (Event, "id, tenant_id, type, data, created_at", self.events),
                (
                    Delivery,
                    "id, tenant_id, event_id, endpoint_id, status, attempt_count, "
                    "schedule_offset, last_error, created_at, updated_at",
                    self.deliveries,
                ),
                (
                    Attempt,
                    "delivery_id, number, started_at, duration_ms, status_code, error, "
                    "response_body",
                    self.attempts,
                ),
                (
                    DeadLetter,
                    "id, tenant_id, delivery_id, event_id, endpoint_id, event_type, reason, "
                    "dead_at",
                    self.letters,
                ),
            ]:
                data = buffer.getvalue()
                if data:
                    with cursor.copy(f"COPY {table._meta.db_table} ({columns}) FROM STDIN") as copy:
                        copy.write(data)
        self.__init__()  # type: ignore[misc]


def _one_delivery(
    batch: _Batch,
    minutes: Counter,
    rng: random.Random,
    *,
    dead: bool,
    event: tuple,
    endpoint: Endpoint,
) -> int:
    """Write one delivery with its attempts (and dead letter); returns its attempts."""
    event_id, event_type, created = event
    delivery_id = _demo_id("dlv", created)
    at = created
    if dead and rng.random() < 0.3:  # answered 4xx: dead at once
        code = rng.choice([404, 400, 410])
        outcomes = [(code, "fatal")]
        reason = f"HTTP {code} (not retryable)"
    elif dead:
        tries = rng.randrange(3, 10)
        code = rng.choice([500, 502, 503, 503, 504])
        outcomes = [(code, "retryable")] * tries
        reason = f"HTTP {code} after {tries} attempts"
    else:
        outcomes = [(503, "retryable")] if rng.random() < 0.12 else []
        outcomes.append((200, "success"))
        reason = ""
    for number, (code, outcome) in enumerate(outcomes, start=1):
        body = '{"ok":true}' if code == 200 else f"upstream answered {code}"
        error = "" if code == 200 else f"HTTP {code}"
        batch.attempts.write(
            f"{delivery_id}\t{number}\t{_ts(at)}\t{rng.randrange(20, 900)}\t{code}\t"
            f"{error}\t{body}\n"
        )
        minutes[(at.replace(second=0, microsecond=0), outcome)] += 1
        at += timedelta(seconds=5 * 3**number)  # roughly the retry schedule
    status = "dead" if dead else "succeeded"
    last = outcomes[-1]
    last_error = "" if not dead else f"HTTP {last[0]}"
    batch.deliveries.write(
        f"{delivery_id}\t{endpoint.tenant_id}\t{event_id}\t{endpoint.id}\t{status}\t"
        f"{len(outcomes)}\t0\t{last_error}\t{_ts(created)}\t{_ts(at)}\n"
    )
    if dead:
        batch.letters.write(
            f"{_demo_id('dl', at)}\t{endpoint.tenant_id}\t{delivery_id}\t{event_id}\t"
            f"{endpoint.id}\t{event_type}\t{reason}\t{_ts(at)}\n"
        )
    batch.rows += len(outcomes) + 2
    return len(outcomes)


def _dies(dead_left: int, attempts_left: int, rng: random.Random) -> bool:
    """Whether the next delivery dies, spreading the dead ones among the succeeded ones
    so that both targets run out together (~4.4 attempts per dead delivery, ~1.12 per
    succeeded one)."""
    if dead_left <= 0:
        return False
    succeeded_left = max(attempts_left - dead_left * 4.4, 0) / 1.12
    return rng.random() < dead_left / (dead_left + succeeded_left)


def demo_data_seed(
    *, dead_letters: int, attempts: int, progress: Callable[[str], None] = lambda _: None
) -> SeedReport:
    endpoints = demo_setup()
    demo = list(TENANTS)
    have_letters = DeadLetter.objects.filter(tenant_id__in=demo).count()
    have_attempts = Attempt.objects.filter(delivery__tenant_id__in=demo).count()
    want_letters = max(dead_letters - have_letters, 0)
    want_attempts = max(attempts - have_attempts, 0)
    progress(
        f"demo data has {have_letters} dead letters and {have_attempts} attempts; "
        f"adding {want_letters} and about {want_attempts}"
    )
    rng, now = random.Random(), timezone.now()
    report = SeedReport(0, 0, 0, 0)
    minutes: Counter = Counter()
    batch = _Batch()
    dead_left, attempts_left = want_letters, want_attempts
    with transaction.atomic():
        while dead_left > 0 or attempts_left > 0:
            dies = _dies(dead_left, attempts_left, rng)
            tenant_id = rng.choice(demo)
            event_type = rng.choice(EVENT_TYPES)
            created = _moment(now, rng)
            event_id = _demo_id("evt", created)
            batch.events.write(
                f"{event_id}\t{tenant_id}\t{event_type}\t{_payload(event_type, rng)}\t"
                f"{_ts(created)}\n"
            )
            made = _one_delivery(
                batch,
                minutes,
                rng,
                dead=dies,
                event=(event_id, event_type, created),
                endpoint=rng.choice(endpoints[tenant_id]),
            )
            dead_left -= dies
            attempts_left -= made
            report.events += 1
            report.deliveries += 1
            report.attempts += made
            report.dead_letters += dies
            if batch.rows >= CHUNK:
                batch.flush()
                progress(f"  {report.dead_letters} dead letters, {report.attempts} attempts")
        batch.flush()
        _add_minutes(minutes)
    _analyze()
    progress(
        f"added {report.events} events, {report.deliveries} deliveries, "
        f"{report.attempts} attempts, {report.dead_letters} dead letters"
    )
    return report


def _add_minutes(minutes: Counter) -> None:
    """Add the seeded attempts to AttemptMinute, as the recorder would have."""
    table = AttemptMinute._meta.db_table
    rows = list(minutes.items())
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 1000):
            chunk = rows[start : start + 1000]
            params: list[object] = []
            for (minute, outcome), n in chunk:
                params += [minute, outcome, n]
            values = ", ".join(["(%s, %s, %s)"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {table} (minute, outcome, count) VALUES {values} "  # noqa: S608
                f"ON CONFLICT (minute, outcome) "
                f"DO UPDATE SET count = {table}.count + EXCLUDED.count",
                params,
            )


def _analyze() -> None:
    """Fresh statistics and visibility maps: the console's estimates and index-only
    counts depend on them right after a bulk load."""
    with connection.cursor() as cursor:
        for model in (Event, Delivery, Attempt, DeadLetter):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
