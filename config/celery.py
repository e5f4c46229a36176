from __future__ import annotations

import os
from typing import Any

from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from core.celery import app

__all__ = ["app"]


@setup_logging.connect
def _use_django_logging(**kwargs: Any) -> None:
    """Celery would otherwise replace the root logger's handlers with its own plain-text
    ones (and redirect stdout into them): the worker logs exactly as the other processes
    do, LOG_FORMAT included."""
    from django.conf import settings

    from config.logs import configure

    configure(settings.LOGGING)
