"""What content routing costs: `python -m bench.filters [--rounds N]`, and in `make bench`
(`--only filters` alone; bench/run.py puts its figures in the table and BENCH_JSON).

Starts a throwaway PostgreSQL and Redis (tests/harness.py) and prints:
1. a filter's evaluation on a 2 KB event (median of many runs; target ≤ 20 µs);
2. a catalog schema's validation of the same event's data (target ≤ 50 µs);
3. ingestion (events_ingest, the one-statement path, single events and batches of 100)
   for a tenant with 100 endpoints, first without filters, then with a distinct filter on
   each of the 100 (a type and a threshold, the usual kind): the process's CPU per event
   (the least of the rounds) and the ratio to the run without filters (target: within
   10 %), once with half of the filters matching (half the deliveries to write) and once
   with all of them matching (as many deliveries as without filters: what the filters
   themselves cost). Rounds
   alternate the three so the machine's load hits them alike. In-process, not through
   gunicorn: the HTTP and DRF work per event is the same with or without filters, so
   leaving it out makes the ratio stricter, and the figure steadier on a busy machine.
The last line is `BENCH_FILTERS_JSON {...}`, the figures as JSON.
"""

from __future__ import annotations

import argparse
import gc
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


def evaluation() -> dict[str, float]:
    from webhooks.filters import event_document, filter_compile
    from webhooks.services.event_schemas import validator_for

    document = event_document("order.paid", DATA, None)
    predicate = filter_compile(FILTER)
    validator = validator_for(SCHEMA)
    assert predicate(document) and validator.is_valid(DATA)
    figures = {
        "event_bytes": len(json.dumps(DATA)),
        "filter_us": round(_median_us(lambda: predicate(document)), 1),
        "schema_validation_us": round(_median_us(lambda: validator.is_valid(DATA)), 1),
    }
    print(f"filter on a {figures['event_bytes']} B event: median {figures['filter_us']} µs")
    print(f"schema validation of it: median {figures['schema_validation_us']} µs")
    return figures


# The three set-ups of the ingestion runs: no filter; 100 distinct filters of which half
# match the event; 100 distinct filters that all match it.
SETUPS = ("none", "half", "all")


def _spec(setup: str, n: int) -> dict[str, Any] | None:
    """Endpoint n's filter: a type and a threshold, distinct per endpoint (equal filters
    would be asked once per event) and matching DATA's amount (120) or not."""
    if setup == "none":
        return None
    threshold = n if setup == "all" or n % 2 else 1000 + n
    return {"type": "order.paid", "data": {"amount": {"$gte": threshold}}}


def ingestion(rounds: int) -> dict[str, dict[str, float]]:
    from deliveries.intake.ingest import events_ingest
    from webhooks.models import Endpoint
    from webhooks.services.endpoint_filters import filter_sealed
    from webhooks.services.event_input import EventInput
    from webhooks.services.tenants import tenant_create

    tenant, _ = tenant_create(name="bench filters")
    Endpoint.objects.bulk_create(
        Endpoint(tenant=tenant, url=f"http://127.0.0.1:9/{n}", secret="x") for n in range(100)
    )
    endpoints = list(Endpoint.objects.filter(tenant=tenant))
    one = [EventInput(type="order.paid", data=DATA)]
    batch = one * 100

    def cpu_per_event(inputs: list[EventInput], calls: int) -> float:
        gc.collect()  # a collection owed by the set-up is not charged to the run
        started = time.process_time()
        for _ in range(calls):
            events_ingest(tenant=tenant, inputs=inputs)
        return (time.process_time() - started) / (calls * len(inputs)) * 1e6

    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for setup in SETUPS:
            for n, endpoint in enumerate(endpoints):
                endpoint.filter = filter_sealed(_spec(setup, n))
            Endpoint.objects.bulk_update(endpoints, ["filter"])  # one statement, not 100
            events_ingest(tenant=tenant, inputs=one)  # the routing cache warm again
            samples.setdefault((setup, "single"), []).append(cpu_per_event(one, 50))
            samples.setdefault((setup, "batch"), []).append(cpu_per_event(batch, 3))
    figures: dict[str, dict[str, float]] = {}
    for kind in ("single", "batch"):
        # The least disturbed round of each: other processes' load only ever adds CPU time
        # (caches, the other hyperthread), and on this shared machine it came and went
        # between rounds (a median moved by up to 25 % from one run to the next).
        plain, half, every = (min(samples[setup, kind]) for setup in SETUPS)
        figures[kind] = {
            "cpu_us_per_event_without_filters": round(plain),
            "cpu_us_per_event_half_match": round(half),
            "cpu_us_per_event_all_match": round(every),
            "ratio_half_match": round(half / plain, 3),
            "ratio_all_match": round(every / plain, 3),
        }
        print(
            f"ingestion ({kind}), 100 endpoints: {plain:.0f} µs CPU per event without "
            f"filters; with 100 distinct filters {half:.0f} µs when half match "
            f"({half / plain:.2f}x, half the deliveries), {every:.0f} µs when all match "
            f"({every / plain:.2f}x, the same deliveries)"
        )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    with django_on_throwaway_servers(
        "filters", redis=True, LOG_LEVEL="ERROR", HOMING_ALLOW_PRIVATE_NETWORKS="true"
    ):
        figures: dict[str, Any] = evaluation()
        figures["ingestion"] = ingestion(args.rounds)
    print("BENCH_FILTERS_JSON " + json.dumps(figures, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
