from __future__ import annotations

from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    verbose_name = "Deliveries and attempts"
