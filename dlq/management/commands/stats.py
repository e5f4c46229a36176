from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dlq.selectors import platform_stats


class Command(BaseCommand):
    help = (
        "Show the delivery queue: deliveries by status, due now, delivery lag, dead letters "
        "and the oldest one's age, open circuits, the endpoints failing most."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        stats = platform_stats()
        if options["json"]:
            self.stdout.write(json.dumps(stats.as_dict(), sort_keys=True))
            return
        by_status = "  ".join(f"{status} {n}" for status, n in stats.deliveries.items())
        circuits = str(stats.open_circuits)
        lines = [
            f"deliveries      {by_status}",
            f"due now         {stats.due_now}",
            f"delivery lag    {stats.delivery_lag_seconds:.1f} s",
            f"dead letters    {stats.dead_letters} waiting, oldest "
            f"{_age(stats.oldest_dead_letter_age_seconds)}",
            f"open circuits   {circuits}",
            "failing most    " + ("none" if not stats.failing_endpoints else ""),
        ]
        lines += [
            f"  {e.endpoint_id}  {e.retrying} retrying, {e.dead_letters} dead  {e.url}"
            for e in stats.failing_endpoints
        ]
        self.stdout.write("\n".join(lines))


def _age(seconds: float) -> str:
    if not seconds:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
