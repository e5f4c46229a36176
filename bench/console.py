"""Console and portal page latency with a big queue: `python -m bench.console [...]`.

Seeds with `manage.py seed_demo` (100,000 dead letters and 1,000,000 attempts by
default), then times every console page with a logged-in staff client (Django's test
client: the whole middleware stack, no HTTP server), then the consumer portal's pages for
the demo owner with the most deliveries, and prints p50/p99 per page.

`console_pages_bench()` needs a configured Django on PostgreSQL (the full benchmark can
call it against its own database); `main()` starts a throwaway PostgreSQL itself.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import TYPE_CHECKING

from bench.throwaway import django_on_throwaway_servers

if TYPE_CHECKING:
    from django.test import Client

PAGES_TARGET_MS = 300  # CONTRACT section 7: every page under 300 ms p99


def console_pages_bench(*, dead_letters: int, attempts: int, rounds: int) -> list[tuple]:
    """Seed, then measure each page `rounds` times; returns (page, p50 ms, p99 ms) rows."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from console.paging import cursor_encode
    from deliveries.models import Delivery
    from dlq.models import DeadLetter
    from webhooks.models import Endpoint, Tenant

    call_command("seed_demo", "--dead-letters", str(dead_letters), "--attempts", str(attempts))
    # A superuser: pages are timed with every action's controls on them.
    staff, _ = User.objects.get_or_create(
        username="bench-staff", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(staff)

    # A page deep in the queue: the keyset makes it cost what the first one does.
    deep = DeadLetter.objects.order_by("-dead_at", "-id")[dead_letters // 2]
    dead_delivery = Delivery.objects.filter(status="dead").order_by("-created_at")[0]
    busiest = Endpoint.objects.order_by("id")[0]
    tenant = Tenant.objects.order_by("id")[0]
    pages = {
        "dashboard /": "/",
        "dead letters": "/dead-letters/",
        "dead letters, deep page": "/dead-letters/?after="
        + cursor_encode(deep.dead_at.isoformat(), deep.id),
        "dead letters ?tenant": f"/dead-letters/?tenant={tenant.id}",
        "dead letters ?endpoint": f"/dead-letters/?endpoint={busiest.id}&replayed=no",
        "dead letters ?reason": "/dead-letters/?reason=not+retryable",
        "dead letters ?event_type": "/dead-letters/?event_type=invoice.sent",
        "delivery": f"/deliveries/{dead_delivery.id}/",
        "endpoint": f"/endpoints/{busiest.id}/",
        "tenants": "/tenants/",
    }
    return _time_pages(client, pages, rounds)


def portal_pages_bench(*, rounds: int) -> list[tuple]:
    """The consumer portal's pages for the demo owner with the most deliveries, through a
    real portal session (link made, exchanged, cookie sent). Call after seeding."""
    from django.db.models import Count
    from django.test import Client

    from console.paging import cursor_encode
    from deliveries.models import Delivery
    from dlq.models import DeadLetter
    from portal.access import COOKIE_NAME
    from portal.services.sessions import portal_session_create, portal_session_exchange
    from webhooks.models import Endpoint, Tenant

    busiest = (
        Delivery.objects.values("endpoint__owner", "tenant_id")
        .annotate(n=Count("id"))
        .order_by("-n")[0]
    )
    owner, tenant = busiest["endpoint__owner"], Tenant.objects.get(pk=busiest["tenant_id"])
    print(f"portal: owner {owner!r} of {tenant.name} has {busiest['n']} deliveries")
    _, link = portal_session_create(tenant=tenant, owner=owner)
    _, cookie = portal_session_exchange(link_token=link)
    client = Client()
    client.cookies[COOKIE_NAME] = cookie
    endpoint = Endpoint.objects.filter(tenant=tenant, owner=owner).order_by("id")[0]
    deep = Delivery.objects.filter(endpoint=endpoint).order_by("-created_at", "-id")[
        Delivery.objects.filter(endpoint=endpoint).count() // 2
    ]
    letter = DeadLetter.objects.filter(endpoint=endpoint).order_by("-dead_at")[0]
    pages = {
        "portal endpoints": "/portal/endpoints/",
        "portal endpoint": f"/portal/endpoints/{endpoint.id}/",
        "portal endpoint, deep page": f"/portal/endpoints/{endpoint.id}/?after="
        + cursor_encode(deep.created_at.isoformat(), deep.id),
        "portal endpoint ?status": f"/portal/endpoints/{endpoint.id}/?status=dead",
        "portal endpoint ?type": f"/portal/endpoints/{endpoint.id}/?event_type=invoice.sent",
        "portal edit (types sent)": f"/portal/endpoints/{endpoint.id}/edit",
        "portal delivery": f"/portal/deliveries/{letter.delivery_id}/",
        "portal dead letters": f"/portal/endpoints/{endpoint.id}/dead-letters/",
    }
    return _time_pages(client, pages, rounds)


def _time_pages(client: Client, pages: dict[str, str], rounds: int) -> list[tuple]:
    rows = []
    for name, path in pages.items():
        client.get(path)  # warm caches and connections
        timings = []
        for _ in range(rounds):
            started = time.perf_counter()
            response = client.get(path)
            timings.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"{path} answered {response.status_code}")
        timings.sort()
        p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
        rows.append((name, statistics.median(timings), p99))
    return rows


def print_table(rows: list[tuple]) -> None:
    print(f"{'page':<28} {'p50 ms':>8} {'p99 ms':>8}")
    for name, p50, p99 in rows:
        flag = "" if p99 < PAGES_TARGET_MS else f"  over {PAGES_TARGET_MS} ms"
        print(f"{name:<28} {p50:>8.1f} {p99:>8.1f}{flag}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dead-letters", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()

    with django_on_throwaway_servers("console", redis=False, ALLOWED_HOSTS="testserver,localhost"):
        started = time.monotonic()
        rows = console_pages_bench(
            dead_letters=args.dead_letters, attempts=args.attempts, rounds=args.rounds
        )
        rows += portal_pages_bench(rounds=args.rounds)
        print(f"(seed and measure took {time.monotonic() - started:.0f} s)")
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
