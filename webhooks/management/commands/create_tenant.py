from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

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
        tenant, raw_key = tenant_create(name=name)
        self.stdout.write(f"Created tenant {tenant.name!r} ({tenant.id}).")
        self.stdout.write("Its API key follows; store it now, it is not shown again:")
        self.stdout.write(raw_key)
