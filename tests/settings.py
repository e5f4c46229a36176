"""Settings for the test suite: the real ones, plus the receiver library's Django app."""

from __future__ import annotations

import importlib.util

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS

if importlib.util.find_spec("homing_receiver"):
    INSTALLED_APPS = [*INSTALLED_APPS, "homing_receiver.django"]

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast staff logins
