"""Settings for the test suite: the real ones, plus the receiver library's Django app."""

from __future__ import annotations

import importlib.util
import os

from tests.parallel import worker_redis_url

# Each xdist worker its own Redis database (tests/parallel.py). Set in the environment,
# before config.settings reads it, so the processes a test starts inherit it too.
if os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"])

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS

if importlib.util.find_spec("homing_receiver"):
    INSTALLED_APPS = [*INSTALLED_APPS, "homing_receiver.django"]

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast staff logins
