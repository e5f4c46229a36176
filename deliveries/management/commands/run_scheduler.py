"""The `scheduler` process: sweeps the database for due and abandoned deliveries."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError, close_old_connections, connection

from deliveries.services.scheduling import deliveries_sweep
from webhooks.services.idempotency import idempotency_records_purge

logger = logging.getLogger("homing.scheduler")

# Due attempts must start within 2 s (p99); a sweep every 0.25 s leaves room for the
# worker. An idle sweep is two index-only queries.
TICK_SECONDS = 0.25
PURGE_EVERY_SECONDS = 300


class Command(BaseCommand):
    help = "Wake workers for due deliveries and recover abandoned ones, until SIGTERM or Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--tick", type=float, default=TICK_SECONDS, help="seconds between sweeps"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        stopping = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.set())
        self.stdout.write(f"scheduler: sweeping every {options['tick']} s")
        next_purge = time.monotonic()
        while not stopping.is_set():
            try:
                report = deliveries_sweep()
                if report.recovered:
                    logger.info("recovered %d deliveries from lost workers", report.recovered)
                if time.monotonic() >= next_purge:
                    idempotency_records_purge()
                    next_purge = time.monotonic() + PURGE_EVERY_SECONDS
            except DatabaseError:
                # PostgreSQL restarting: drop the broken connection and try again.
                logger.warning("database unavailable; retrying", exc_info=True)
                connection.close()
                stopping.wait(1)
                continue
            except Exception:
                logger.exception("sweep failed; retrying")
            close_old_connections()
            stopping.wait(options["tick"])
        self.stdout.write("scheduler: stopped")
