"""`manage.py seed_demo`: fill the database with demo data for the console."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from console.services.demo_data import demo_data_seed


class Command(BaseCommand):
    help = (
        "Load demo tenants, endpoints, events, deliveries, attempts and dead letters "
        "(PostgreSQL). Idempotent: a second run only tops up to the numbers asked for."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dead-letters", type=int, default=500, help="dead letters (500)")
        parser.add_argument("--attempts", type=int, default=5000, help="attempts, about (5000)")

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql":
            # The rows are generated inside the database with PostgreSQL's functions.
            raise CommandError("seed_demo needs PostgreSQL: set DATABASE_URL.")
        started = time.monotonic()
        demo_data_seed(
            dead_letters=options["dead_letters"],
            attempts=options["attempts"],
            progress=lambda line: self.stdout.write(line),
        )
        self.stdout.write(self.style.SUCCESS(f"done in {time.monotonic() - started:.1f} s"))
