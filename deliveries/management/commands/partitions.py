"""`manage.py partitions [--dry-run]`: the partitions of history (PostgreSQL)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from deliveries.lifecycle.partitions import (
    history_partitioned,
    partitions_drop_expired,
    partitions_ensure,
    partitions_list,
)


class Command(BaseCommand):
    help = (
        "List the partitions of events, deliveries and attempts with their rows and size, "
        "create those due in the next two intervals (HOMING_PARTITION_INTERVAL) and drop "
        "those wholly past HOMING_RETENTION (the scheduler does this on its own). "
        "PostgreSQL only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="say what, change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        if not history_partitioned():
            raise CommandError("history is not partitioned here (PostgreSQL only)")
        dry_run = options["dry_run"]
        self.stdout.write(f"{'table':<22} {'partition':<40} {'rows':>10} {'size':>10}  span")
        for p in partitions_list():
            self.stdout.write(
                f"{p.table:<22} {p.name:<40} {p.rows:>10} {_size(p.bytes):>10}  {p.span}"
            )
        prefix = "(dry run) " if dry_run else ""
        outcomes = partitions_ensure(dry_run=dry_run) + partitions_drop_expired(dry_run=dry_run)
        for outcome in outcomes:
            self.stdout.write(f"{prefix}{outcome}")
        if not outcomes:
            self.stdout.write("Nothing to create or drop.")


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
