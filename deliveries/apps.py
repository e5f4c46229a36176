from __future__ import annotations

from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    verbose_name = "Deliveries and attempts"

    def ready(self) -> None:
        # An endpoint deactivated or deleted (in webhooks, below this app) leaves its
        # deliveries to clear.
        from deliveries.services.endpoint_backlogs import endpoint_retired_received
        from webhooks.signals import endpoint_retired

        endpoint_retired.connect(endpoint_retired_received, dispatch_uid="deliveries.backlogs")
