"""The `worker` process: a Celery worker, restarted if it dies.

Celery's Redis transport can die on a broker restart ("Unrecoverable error" in kombu
while reconnecting); the deliveries it held are safe (their leases expire), but a dead
worker sends nothing more. This keeps one running until SIGTERM or Ctrl-C, which it
passes on for a warm shutdown.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

RESTART_DELAY_SECONDS = 1.0


class Command(BaseCommand):
    help = "Run a Celery worker for deliveries and restart it whenever it exits unexpectedly."

    def add_arguments(self, parser: CommandParser) -> None:
        # Celery threads only take wake-up messages; HOMING_SEND_CONCURRENCY sizes the sending.
        parser.add_argument("--concurrency", type=int, default=2)
        parser.add_argument("--name", default="worker")
        parser.add_argument("--loglevel", default="INFO")

    def handle(self, *args: Any, **options: Any) -> None:
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(options["concurrency"]),
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            options["loglevel"],
            "-n",
            f"{options['name']}@%h",
        ]
        if settings.LOG_FORMAT == "json":
            command.insert(3, "--quiet")  # the start-up banner is not a JSON log line
        stopping = False
        child: subprocess.Popen[bytes] | None = None

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True
            if child and child.poll() is None:
                child.send_signal(signal.SIGTERM)  # Celery's warm shutdown

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while not stopping:
            child = subprocess.Popen(command)
            code = child.wait()
            if stopping:
                break
            self.stderr.write(f"worker exited with {code}; restarting in {RESTART_DELAY_SECONDS} s")
            time.sleep(RESTART_DELAY_SECONDS)
        if child and child.poll() is None:
            child.wait()
