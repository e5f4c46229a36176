"""The `scheduler` process: sweeps the database for due and abandoned deliveries."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError, close_old_connections, connection

from deliveries.lifecycle.endpoint_backlogs import endpoint_backlogs_work
from deliveries.lifecycle.partitions import history_partitioned, partitions_ensure
from deliveries.lifecycle.scheduling import deliveries_sweep
from dlq.services.retention import retention_purge

logger = logging.getLogger("homing.scheduler")

# Due attempts must start within 2 s (p99); a sweep every 0.25 s leaves room for the
# worker. An idle sweep is two index-only queries.
TICK_SECONDS = 0.25
# Retention (finished events, expired idempotency records), in small batches; on
# PostgreSQL also the partitions of history: created ahead, dropped when expired.
PURGE_EVERY_SECONDS = 60
PURGE_BUDGET_SECONDS = 0.5  # per tick: sweeps must not wait for a long purge
# Backlogs of deactivated and deleted endpoints that their job left (killed, or its
# message lost): looked for this often, then worked off a budget per tick.
BACKLOGS_EVERY_SECONDS = 10
BACKLOGS_BUDGET_SECONDS = 0.5


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
        logger.info("scheduler: sweeping every %s s", options["tick"])
        next_purge = next_backlogs = time.monotonic()
        while not stopping.is_set():
            try:
                report = deliveries_sweep()
                if report.recovered:
                    logger.info("recovered %d deliveries from lost workers", report.recovered)
                if time.monotonic() >= next_purge:
                    if history_partitioned():
                        # The next intervals' partitions, before their first row comes;
                        # expired ones are dropped by the purge (retention.py).
                        for step in partitions_ensure():
                            logger.info("partitions: %s", step)
                    purged = retention_purge(time_budget=PURGE_BUDGET_SECONDS)
                    # A backlog is worked off a budget per tick, between sweeps.
                    wait = purge_every() if purged.complete else 0
                    next_purge = time.monotonic() + wait
                if time.monotonic() >= next_backlogs:
                    done = endpoint_backlogs_work(time_budget=BACKLOGS_BUDGET_SECONDS)
                    wait = BACKLOGS_EVERY_SECONDS if done else 0
                    next_backlogs = time.monotonic() + wait
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
        logger.info("scheduler: stopped")


def purge_every() -> float:
    """Seconds between two purges: a minute, or a quarter of a partition's interval when
    that is shorter, so an interval is dropped soon after it expires however short."""
    return min(PURGE_EVERY_SECONDS, max(1.0, settings.HOMING_PARTITION_INTERVAL / 4))
