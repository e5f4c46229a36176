"""The Celery app: every app publishes its messages through it, by task name.

Here in `core` so that an app can send a message without importing the project
(`config/`); `config/celery.py` loads it with Django in every process and sets up its
logging. Tasks are found in each installed app's `tasks.py`.
"""

from __future__ import annotations

from celery import Celery

app = Celery("homing")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
