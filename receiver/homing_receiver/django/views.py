"""A decorator that turns a Django view into a verified, deduplicated webhook endpoint."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from homing_receiver.dedup import Deduplicator
from homing_receiver.errors import DuplicateInProgress, WebhookVerificationError
from homing_receiver.sequences import SequenceTracker, sequence_from_headers
from homing_receiver.verify import ID_HEADER, Webhook

logger = logging.getLogger("homing_receiver")

WebhookHandlerView = Callable[..., HttpResponse]


def webhook_view(
    *,
    secret: str | bytes | Webhook,
    deduplicator: Deduplicator | None = None,
    tolerance: int = 300,
    tracker: SequenceTracker | None = None,
) -> Callable[[WebhookHandlerView], Callable[..., HttpResponse]]:
    """Decorate ``view(request, event, *args, **kwargs)``; answers the sender as follows.

    * not POST -> 405; bad signature, headers, timestamp or body -> 400 {"message": ...}
    * event id already processed -> 200 without calling the view
    * event id being processed by another worker -> 409 (the sender retries later)
    * view raises -> 500, the claim is released so the sender's retry runs the view
    * otherwise -> the view's response

    The event id is the ``webhook-id`` header. Without a deduplicator every verified
    request reaches the view. With a *tracker*, a 2xx answer (the view's, or the 200 to
    an already processed duplicate) records the request's ``homing-sequence``.
    """
    webhook = secret if isinstance(secret, Webhook) else Webhook(secret, tolerance)

    def decorator(view: WebhookHandlerView) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                event = webhook.verify(request.body, request.headers)
            except WebhookVerificationError as exc:
                logger.warning("Rejected webhook: %s", exc)
                return JsonResponse({"message": str(exc)}, status=400)

            event_id = request.headers[ID_HEADER]
            # Read before the view runs, so a malformed value is logged even if it fails.
            sequence = sequence_from_headers(request.headers) if tracker is not None else None
            responses: list[HttpResponse] = []

            def handler() -> None:
                responses.append(view(request, event, *args, **kwargs))

            try:
                if deduplicator is None:
                    handler()
                elif not deduplicator.process(event_id, handler):
                    logger.info("Skipped duplicate webhook %s: already processed", event_id)
                    responses.append(
                        JsonResponse(
                            {"message": f"Duplicate of already processed event {event_id}"}
                        )
                    )
            except DuplicateInProgress as exc:
                logger.info(
                    "Deferred duplicate webhook %s: still in progress elsewhere",
                    event_id,
                )
                return JsonResponse({"message": str(exc)}, status=409)
            except Exception:
                # Answer 500 ourselves so the sender retries; process() already
                # released the claim, so that retry will run the view again.
                logger.exception("Webhook %s: view raised", event_id)
                _roll_back_atomic_requests()
                return JsonResponse({"message": "Webhook handler failed"}, status=500)
            if (
                tracker is not None
                and sequence is not None
                and 200 <= responses[0].status_code < 300
            ):
                _record_sequence(tracker, sequence, event_id)
            return responses[0]

        return csrf_exempt(require_POST(wrapper))

    return decorator


def _record_sequence(tracker: SequenceTracker, sequence: int, event_id: str) -> None:
    # The view's work is done and answered for; failing the request now would make the
    # sender run it again. An unrecorded sequence only means catch_up fetches it again
    # (and a deduplicator skips it).
    try:
        tracker.see(sequence)
    except Exception:
        logger.exception(
            "Webhook %s: could not record sequence %s; catch_up will fetch it again",
            event_id,
            sequence,
        )


def _roll_back_atomic_requests() -> None:
    # Under ATOMIC_REQUESTS Django rolls back only when the view raises; we answer 500
    # instead, so undo the failed view's writes ourselves rather than commit half of them.
    for conn in connections.all(initialized_only=True):
        if conn.settings_dict.get("ATOMIC_REQUESTS") and conn.in_atomic_block:
            transaction.set_rollback(True, using=conn.alias)
