"""How a request that names no valid API key is refused, shared by the authentication
(webhooks/api/authentication.py) and the error renderer (api/errors.py). No DRF import
here: DRF imports the authentication class while its own views module loads."""

from __future__ import annotations

KEYWORD = "Bearer"  # the WWW-Authenticate challenge of every 401


class ApiKeyRefused(Exception):
    """A 401: the message says why."""
