"""Django integration: add ``"homing_receiver.django"`` to INSTALLED_APPS.

``DjangoStore`` and ``webhook_view`` are imported lazily (PEP 562): Django imports
this package while it is still loading apps, before models may be imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from homing_receiver.django.store import DjangoStore
    from homing_receiver.django.views import webhook_view

__all__ = ["DjangoStore", "webhook_view"]


def __getattr__(name: str) -> Any:
    if name == "DjangoStore":
        from homing_receiver.django.store import DjangoStore

        return DjangoStore
    if name == "webhook_view":
        from homing_receiver.django.views import webhook_view

        return webhook_view
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
