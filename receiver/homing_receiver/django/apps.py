from __future__ import annotations

from django.apps import AppConfig


class HomingReceiverConfig(AppConfig):
    name = "homing_receiver.django"
    # The default label would be "django", which clashes with nothing today but
    # reads badly in table names and migrations; give it a distinct one.
    label = "homing_receiver"
    verbose_name = "Homing receiver"
    # Pinned so the shipped migration does not depend on the project's setting.
    default_auto_field = "django.db.models.BigAutoField"
