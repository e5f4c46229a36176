from __future__ import annotations

from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    verbose_name = "Deliveries and attempts"

    def ready(self) -> None:
        # An endpoint deactivated or deleted (in webhooks, below this app) leaves its
        # deliveries to clear.
        from deliveries.lifecycle.endpoint_backlogs import endpoint_retired_received
        from webhooks.signals import endpoint_retired

        endpoint_retired.connect(endpoint_retired_received, dispatch_uid="deliveries.backlogs")
        # Lifecycle's news reaches the rooms it may not import (LAYOUT.md): intake ingests
        # operational events, the worker's concurrency ramps endpoints that answered.
        from deliveries.intake.operational import operational_events_received
        from deliveries.signals import endpoints_answered, operational_events
        from deliveries.worker.concurrency import endpoints_answered_received

        operational_events.connect(operational_events_received, dispatch_uid="deliveries.ops")
        endpoints_answered.connect(endpoints_answered_received, dispatch_uid="deliveries.ramp")
