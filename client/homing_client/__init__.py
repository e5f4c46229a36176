"""Publish events to Homing. The plain client needs only the standard library."""

from __future__ import annotations

from homing_client.client import Client
from homing_client.errors import HomingError, HomingThrottled, HomingUnavailable

__all__ = ["Client", "HomingError", "HomingThrottled", "HomingUnavailable"]
