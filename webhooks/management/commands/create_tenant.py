from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.exceptions import InvalidInput
from webhooks.services.tenants import tenant_create


class Command(BaseCommand):
    help = "Create a tenant and print its API key (shown only this once) on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="Human-readable tenant name")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        if not name:
            self.stderr.write("The tenant name must not be empty.")
            raise SystemExit(2)
        try:
            tenant, raw_key = tenant_create(name=name)
        except InvalidInput as error:
            # A clear line on stderr and exit status 2, as for an empty name: no traceback.
            raise CommandError(
                f"Invalid tenant {error.field}: {error.detail}", returncode=2
            ) from None
        self.stdout.write(f"Created tenant {tenant.name!r} ({tenant.id}).")
        self.stdout.write("Its API key follows; store it now, it is not shown again:")
        self.stdout.write(raw_key)
