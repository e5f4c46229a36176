from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)  # as get_wsgi_application() does

from config.intake_handler import Application  # noqa: E402  # needs the apps loaded

application = Application()
