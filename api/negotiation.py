"""The API answers in a representation it has, whatever `Accept` or `?format=` ask for.

DRF's default negotiation answered 406 to `Accept: text/html` and 404 to `?format=xml`,
statuses the schema does not declare; the event intake (plain Django) always answered
JSON. Now a request that asks for something the route cannot render gets its first
representation: JSON on every API route (the schema route keeps YAML and JSON).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.http import Http404
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class FirstRendererFallback(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        offered = list(renderers)  # DRF passes a list already; the fallback takes its first
        try:
            return super().select_renderer(request, offered, format_suffix)
        except (NotAcceptable, Http404):  # Http404: an unknown `?format=`
            return offered[0], offered[0].media_type
