"""Django outbox: add ``"homing_client.django"`` to INSTALLED_APPS.

Names are imported lazily (PEP 562): Django imports this package while it is still
loading apps, before models may be imported, and the plain client must not need Django.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from homing_client.django.outbox import oldest_pending_age_seconds, publish_on_commit
    from homing_client.django.relay import Relay, outbox_relay_batch, outbox_relay_pending

__all__ = [
    "Relay",
    "oldest_pending_age_seconds",
    "outbox_relay_batch",
    "outbox_relay_pending",
    "publish_on_commit",
]

_HOMES = {
    "publish_on_commit": "homing_client.django.outbox",
    "oldest_pending_age_seconds": "homing_client.django.outbox",
    "Relay": "homing_client.django.relay",
    "outbox_relay_batch": "homing_client.django.relay",
    "outbox_relay_pending": "homing_client.django.relay",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
