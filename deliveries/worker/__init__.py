"""The worker process's delivery machinery, owned by one `Worker`."""

from __future__ import annotations

from deliveries.worker.worker import Worker

__all__ = ["Worker"]
