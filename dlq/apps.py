from __future__ import annotations

from django.apps import AppConfig


class DlqConfig(AppConfig):
    name = "dlq"
    verbose_name = "Dead-letter queue"

    def ready(self) -> None:
        # Recording (in deliveries, below this app) announces deaths; dlq parks them.
        from deliveries.signals import deliveries_deleting, deliveries_died
        from dlq.services.dead_letters import (
            deliveries_deleting_received,
            deliveries_died_received,
        )

        deliveries_died.connect(deliveries_died_received, dispatch_uid="dlq.dead_letters")
        # An endpoint being deleted: its deliveries' dead letters go with each batch.
        deliveries_deleting.connect(
            deliveries_deleting_received, dispatch_uid="dlq.dead_letters_deleting"
        )
