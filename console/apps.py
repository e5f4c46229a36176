from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Staff console"

    def ready(self) -> None:
        from console.login import connect_signals

        connect_signals()  # a sign-in that succeeds gives its counted attempt back
