"""The API answers in a representation it has, whatever `Accept` or `?format=` ask for.

DRF's default negotiation answered 406 to `Accept: text/html` and 404 to `?format=xml`,
statuses the schema does not declare; the event intake (plain Django) always answered
JSON. Now a request that asks for something the route cannot render gets its first
representation: JSON on every API route (the schema route keeps YAML and JSON).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request


class FirstRendererFallback(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: list[Any], format_suffix: str | None = None
    ) -> tuple[Any, str]:
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except (NotAcceptable, Http404):  # Http404: an unknown `?format=`
            return renderers[0], renderers[0].media_type
