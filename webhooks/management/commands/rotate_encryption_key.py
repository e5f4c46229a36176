"""Re-encrypt every endpoint secret with the first key of HOMING_ENCRYPTION_KEY.

The rotation (README, "Rotating the encryption key"): put the new key first and the old
one after it (`HOMING_ENCRYPTION_KEY=new,old`), restart every process, run this command,
then remove the old key and restart again.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from webhooks.models import Endpoint
from webhooks.services.endpoints import endpoint_secrets_reencrypt


class Command(BaseCommand):
    help = (
        "Re-encrypt every endpoint secret and custom header value with the first key of "
        "HOMING_ENCRYPTION_KEY."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Print how many would change; change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            self.stdout.write(
                f"would re-encrypt the secrets of {Endpoint.objects.count()} endpoints"
            )
            return
        done = endpoint_secrets_reencrypt()
        self.stdout.write(f"re-encrypted the secrets of {done} endpoints")
