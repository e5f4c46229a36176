"""What content routing costs: `python -m bench.filters [--rounds N]`.

Starts a throwaway PostgreSQL and Redis (tests/harness.py) and prints:
1. a filter's evaluation on a 2 KB event (median of many runs; target ≤ 20 µs);
2. a catalog schema's validation of the same event's data (target ≤ 50 µs);
3. ingestion (events_ingest, the one-statement path, single events and batches of 100)
   for a tenant with 100 endpoints, first without filters, then with a filter on each of
   the 100 (half of them matching): the process's CPU per event, and the ratio (target:
   within 10 %). Rounds alternate A B A B so the machine's load hits both alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from bench.throwaway import django_on_throwaway_servers

DATA = {
    "amount": 120,
    "currency": "EUR",
    "customer": {"id": "cus_123", "tier": "gold", "country": "DE"},
    "items": [{"sku": f"S{n}", "qty": n, "name": "x" * 30} for n in range(20)],
    "note": "y" * 550,
}
FILTER = {
    "type": {"$in": ["order.paid", "order.refunded"]},
    "data": {
        "amount": {"$gte": 100, "$lt": 1000},
        "customer": {"tier": {"$in": ["gold", "platinum"]}, "country": {"$nin": ["US"]}},
        "items": {"sku": "S19"},
    },
}
SCHEMA = {
    "type": "object",
    "required": ["amount", "currency", "customer", "items"],
    "properties": {
        "amount": {"type": "integer", "minimum": 0},
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
        "customer": {"type": "object", "required": ["id"]},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku", "qty"]}},
        "note": {"type": "string"},
    },
}


def _median_us(call: Any, *, runs: int = 51, per_run: int = 500) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(per_run):
            call()
        samples.append((time.perf_counter() - started) / per_run * 1e6)
    return statistics.median(samples)


def evaluation() -> None:
    from webhooks.filters import event_document, filter_compile
    from webhooks.services.event_schemas import validator_for

    document = event_document("order.paid", DATA, None)
    predicate = filter_compile(FILTER)
    validator = validator_for(SCHEMA)
    assert predicate(document) and validator.is_valid(DATA)
    size = len(json.dumps(DATA))
    print(f"filter on a {size} B event: median {_median_us(lambda: predicate(document)):.1f} µs")
    print(f"schema validation of it: median {_median_us(lambda: validator.is_valid(DATA)):.1f} µs")


def ingestion(rounds: int) -> None:
    from deliveries.intake.ingest import events_ingest
    from webhooks.models import Endpoint
    from webhooks.services.event_input import EventInput
    from webhooks.services.tenants import tenant_create

    tenant, _ = tenant_create(name="bench filters")
    Endpoint.objects.bulk_create(
        Endpoint(tenant=tenant, url=f"http://127.0.0.1:9/{n}", secret="x") for n in range(100)
    )
    ids = list(Endpoint.objects.filter(tenant=tenant).values_list("pk", flat=True))
    one = [EventInput(type="order.paid", data=DATA)]
    batch = one * 100

    def cpu_per_event(inputs: list[EventInput], calls: int) -> float:
        started = time.process_time()
        for _ in range(calls):
            events_ingest(tenant=tenant, inputs=inputs)
        return (time.process_time() - started) / (calls * len(inputs)) * 1e6

    def set_filters(on: bool) -> None:
        # 100 different filters of the usual kind (a type and a threshold; equal filters
        # would be evaluated once per event), half of which match the event.
        for n, pk in enumerate(ids):
            threshold = n if n % 2 else 1000 + n
            spec = {"type": "order.paid", "data": {"amount": {"$gte": threshold}}}
            Endpoint.objects.filter(pk=pk).update(filter=spec if on else None)

    figures: dict[tuple[bool, str], list[float]] = {}
    for _ in range(rounds):
        for on in (False, True):
            set_filters(on)
            events_ingest(tenant=tenant, inputs=one)  # the routing cache warm again
            figures.setdefault((on, "single"), []).append(cpu_per_event(one, 100))
            figures.setdefault((on, "batch"), []).append(cpu_per_event(batch, 3))
    for kind in ("single", "batch"):
        plain = statistics.median(figures[(False, kind)])
        filtered = statistics.median(figures[(True, kind)])
        print(
            f"ingestion ({kind}), 100 endpoints: {plain:.0f} µs CPU per event without "
            f"filters, {filtered:.0f} µs with 100 filters (half match, all distinct): "
            f"{filtered / plain:.2f}x (fewer deliveries to write with filters)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with django_on_throwaway_servers(
        "filters", redis=True, LOG_LEVEL="ERROR", HOMING_ALLOW_PRIVATE_NETWORKS="true"
    ):
        evaluation()
        ingestion(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
