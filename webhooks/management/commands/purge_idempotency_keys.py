from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from webhooks.services.idempotency import idempotency_records_purge


class Command(BaseCommand):
    help = "Delete Idempotency-Key records older than HOMING_IDEMPOTENCY_TTL."

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = idempotency_records_purge()
        self.stdout.write(f"Deleted {deleted} expired idempotency records.")
