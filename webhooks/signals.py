"""What webhooks tell the apps above them; those connect their receivers in their
`AppConfig.ready()`.

Deliveries sit above webhooks (their models point at endpoints), so the endpoint
services cannot call them: they send `endpoint_retired` and `deliveries` clears what the
endpoint left behind.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside the transaction that deactivated an endpoint or marked it deleted, with
# `endpoint_id`. Its pending deliveries (or all its rows, when deleted) are left to clear.
endpoint_retired = Signal()
