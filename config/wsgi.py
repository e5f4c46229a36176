from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)  # as get_wsgi_application() does

from config.intake_handler import Application  # noqa: E402  # needs the apps loaded
from core.tracing import tracing_start  # noqa: E402

# Each web process (gunicorn loads this after forking) exports its own spans, when the
# OTEL_* variables ask for it (core/tracing.py).
tracing_start(service="homing-web")

application = Application()
