from __future__ import annotations

from django.apps import AppConfig


class HomingClientConfig(AppConfig):
    name = "homing_client.django"
    label = "homing_client"
    verbose_name = "Homing outbox"
    default_auto_field = "django.db.models.BigAutoField"
