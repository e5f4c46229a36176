from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand

from homing_client.django.relay import Relay, outbox_relay_pending


class Command(BaseCommand):
    help = "Send committed outbox rows to Homing; runs until SIGTERM (or drains once)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--batch-size", type=int, default=100)
        parser.add_argument(
            "--batch-seconds",
            type=float,
            default=10.0,
            help="send no new row of a batch after this long (its row locks are held)",
        )
        parser.add_argument(
            "--poll-interval", type=float, default=5.0, help="seconds between safety polls"
        )
        parser.add_argument(
            "--max-backoff", type=float, default=30.0, help="longest wait while Homing is down"
        )
        parser.add_argument("--database", default=None, help="database alias of the outbox")
        parser.add_argument("--once", action="store_true", help="send what is pending and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            result = outbox_relay_pending(
                batch_size=options["batch_size"], using=options["database"]
            )
            self.stdout.write(f"sent {result.sent}, refused {result.failed}")
            return
        relay = Relay(
            batch_size=options["batch_size"],
            batch_seconds=options["batch_seconds"],
            poll_interval=options["poll_interval"],
            max_backoff=options["max_backoff"],
            using=options["database"],
        )
        # Finish the batch in hand (its marks commit), then exit: a clean deploy.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: relay.stop())
        self.stdout.write("homing_relay: started", ending="\n")
        self.stdout.flush()
        relay.run()
        self.stdout.write("homing_relay: stopped")
