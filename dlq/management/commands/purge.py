from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from dlq.services.retention import PurgeReport, retention_purge


class Command(BaseCommand):
    help = (
        "Run the retention purge now: finished events older than HOMING_RETENTION with their "
        "deliveries and attempts, and expired idempotency records (the scheduler does this "
        "every minute). Prints the counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        dry_run = options["dry_run"]

        def progress(report: PurgeReport) -> None:
            self.stdout.write(f"... {report.events} events so far")

        report = retention_purge(dry_run=dry_run, progress=progress)
        verb = "Would purge" if dry_run else "Purged"
        days = settings.HOMING_RETENTION / 86400
        self.stdout.write(f"{verb} (retention {days:g} days): {report}.")
