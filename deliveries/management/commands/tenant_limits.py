from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from deliveries.intake.backpressure import tenant_limits_effective, tenant_limits_set
from webhooks.models import Tenant


def _count(raw: str, *, words: dict[str, int | None], option: str) -> int | None:
    if raw.lower() in words:
        return words[raw.lower()]
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= 10**12:
        choices = " or ".join(["a whole number from 1", *words])
        raise CommandError(f"{option}: {raw!r} is not {choices}.")
    return int(raw)


class Command(BaseCommand):
    help = (
        "Show or set one tenant's backpressure limits (events per second, unfinished "
        "deliveries) and print the effective ones. Web processes apply a change within "
        "a few seconds."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant_id", help="the tenant's id (ten_...)")
        parser.add_argument(
            "--event-rate",
            metavar="N|none|default",
            help="most events per second; none: no limit for this tenant; default: "
            "HOMING_TENANT_EVENT_RATE",
        )
        parser.add_argument(
            "--max-backlog",
            metavar="N|default",
            help="most unfinished deliveries; default: HOMING_TENANT_MAX_BACKLOG",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="print what the limits would be; change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(pk=options["tenant_id"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant_id']!r}.")
        event_rate, max_backlog = tenant.event_rate, tenant.max_backlog
        if options["event_rate"] is not None:
            event_rate = _count(
                options["event_rate"], words={"none": 0, "default": None}, option="--event-rate"
            )
        if options["max_backlog"] is not None:
            max_backlog = _count(
                options["max_backlog"], words={"default": None}, option="--max-backlog"
            )
        changing = options["event_rate"] is not None or options["max_backlog"] is not None
        if changing:
            limits = tenant_limits_set(
                tenant=tenant,
                event_rate=event_rate,
                max_backlog=max_backlog,
                dry_run=options["dry_run"],
            )
        else:
            limits = tenant_limits_effective(tenant=tenant)
        self.stdout.write(f"Tenant {tenant.name!r} ({tenant.pk}):")
        rate_source = (
            "HOMING_TENANT_EVENT_RATE" if tenant.event_rate is None else "this tenant's own"
        )
        rate = "no limit" if limits.event_rate is None else f"{limits.event_rate} per second"
        self.stdout.write(f"  event rate:  {rate} ({rate_source})")
        backlog_source = (
            "HOMING_TENANT_MAX_BACKLOG" if tenant.max_backlog is None else "this tenant's own"
        )
        self.stdout.write(
            f"  max backlog: {limits.max_backlog} unfinished deliveries ({backlog_source})"
        )
        if changing and options["dry_run"]:
            self.stdout.write("Dry run: nothing was changed.")
