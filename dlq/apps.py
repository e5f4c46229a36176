from __future__ import annotations

from django.apps import AppConfig


class DlqConfig(AppConfig):
    name = "dlq"
    verbose_name = "Dead-letter queue"

    def ready(self) -> None:
        # Recording (in deliveries, below this app) announces deaths; dlq parks them.
        from deliveries.signals import deliveries_died
        from dlq.services.dead_letters import deliveries_died_received

        deliveries_died.connect(deliveries_died_received, dispatch_uid="dlq.dead_letters")
