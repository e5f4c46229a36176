from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def lose_first_success(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Replace the first 200 with a 500, as if the answer had been lost on its way back.

    This runs outside webhook_view: by now the payment row is written and the event's
    claim marked done, which is exactly when a sender delivers the event again.
    """
    marker = Path(settings.LOST_RESPONSE_MARKER)

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if response.status_code != 200:
            return response
        try:
            marker.touch(exist_ok=False)  # O_EXCL: one winner across gunicorn workers
        except FileExistsError:
            return response
        return HttpResponse("response lost", status=500)

    return middleware
