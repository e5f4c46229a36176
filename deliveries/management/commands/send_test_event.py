from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from deliveries.intake.ingest import endpoint_send_test
from webhooks.models import Endpoint
from webhooks.services.endpoints import EndpointInactive


class Command(BaseCommand):
    help = (
        "Send a homing.test event to one endpoint (whatever its event types), as "
        "POST /api/v1/endpoints/{id}/test does; prints the event and delivery ids."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("endpoint_id", help="the endpoint's id (ep_...)")

    def handle(self, *args: Any, **options: Any) -> None:
        endpoint = Endpoint.objects.filter(pk=options["endpoint_id"]).first()
        if endpoint is None:
            self.stderr.write(f"No endpoint with id {options['endpoint_id']!r}.")
            raise SystemExit(2)
        try:
            event, delivery = endpoint_send_test(endpoint=endpoint)
        except EndpointInactive as exc:
            self.stderr.write(exc.message)
            raise SystemExit(2) from None
        self.stdout.write(f"Sent event {event.id} to {endpoint.url}: delivery {delivery.id}.")
