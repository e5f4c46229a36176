from __future__ import annotations

import json

from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from homing_client.django import oldest_pending_age_seconds, publish_on_commit


class CustomerChangedTheirMind(Exception):
    """Raised after publishing, to roll the whole order back."""


@csrf_exempt
def create_orders(request: HttpRequest) -> JsonResponse:
    """Create `count` orders and publish an `order.created` event for each, atomically.

    Options in the JSON body: `fail` (roll back after publishing), `unserializable`
    (data JSON cannot carry), `big` (data over Homing's payload limit), `ordering_key`.
    """
    spec = json.loads(request.body or b"{}")
    outbox_ids: list[str] = []
    try:
        with transaction.atomic():
            for _ in range(spec.get("count", 1)):
                with connection.cursor() as cursor:
                    cursor.execute(
                        "INSERT INTO orders (amount) VALUES (%s) RETURNING id",
                        [spec.get("amount", 1)],
                    )
                    (order_id,) = cursor.fetchone()
                data: dict = {"order_id": order_id, "amount": spec.get("amount", 1)}
                if spec.get("unserializable"):
                    data["tags"] = {"gift", "express"}  # a set: not JSON
                if spec.get("big"):
                    data["note"] = "x" * 300_000  # over Homing's 256 KiB payload limit
                outbox_ids.append(
                    publish_on_commit("order.created", data, ordering_key=spec.get("ordering_key"))
                )
            if spec.get("fail"):
                raise CustomerChangedTheirMind
    except CustomerChangedTheirMind:
        return JsonResponse({"rolled_back": outbox_ids}, status=409)
    except TypeError as error:
        return JsonResponse({"error": f"TypeError: {error}"}, status=400)
    return JsonResponse({"outbox_ids": outbox_ids}, status=201)


def outbox_age(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"homing_outbox_oldest_age_seconds": oldest_pending_age_seconds()})
