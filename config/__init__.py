from __future__ import annotations

# Load the Celery app with Django so that `shared_task` and `on_commit` publishing
# find it in every process (web, worker, scheduler).
from config.celery import app as celery_app

__all__ = ["celery_app"]
