"""What an endpoint leaves behind when it is deactivated or deleted, worked off in the
background in bounded batches, never inside the request that changed it.

The request only changes the endpoint row, in one short transaction: `is_active=false`
(deactivation), or `is_active=false` plus `deleted_at` (deletion: the endpoint is hidden
from every API and page at once). From then on claims leave it alone (they only take
active endpoints) and ingestion routes nothing to it. Then this job:
- deactivated: parks its pending deliveries as dead letters (`endpoint deactivated`),
  PARK_BATCH per transaction (deliveries/lifecycle/interventions.py);
- deleted: deletes its deliveries (with their attempts and dead letters) DELETE_BATCH per
  transaction, and the endpoint row last.

The endpoint row is the job's record: what is left to do is read from the data itself
(an inactive endpoint with pending deliveries, an endpoint with `deleted_at`), so there is
no progress row to lose. A Celery task starts the work right after the request commits
(like the bulk replay jobs); the scheduler finds whatever a killed or lost task left and
carries on (`endpoint_backlogs_work`). Any number of runners may work one endpoint at once:
each batch takes rows with SKIP LOCKED, so no row is handled twice.
"""

from __future__ import annotations

import logging
import time

from django.db import connection, transaction

from core.celery import app
from deliveries.lifecycle.backlog_sql import INACTIVE_WITH_PENDING, INACTIVE_WITH_PENDING_SQLITE
from deliveries.lifecycle.interventions import (
    DEACTIVATED_REASON,
    WAITING,
    deliveries_kill_for_endpoint,
)
from deliveries.models import Delivery
from deliveries.signals import deliveries_deleting_send
from webhooks.models import Endpoint

logger = logging.getLogger(__name__)

CLEAR_TASK = "deliveries.endpoint_backlog_clear"
# Deliveries deleted per transaction (each with its attempts and dead letters): a few
# hundred milliseconds at most, so a recorder waiting on one of them waits that long.
DELETE_BATCH = 1000
# Endpoints the scheduler's sweep lists at most per look (the rest on the next one).
SWEEP_LIMIT = 100
# One task works this long, then hands the rest on to a new message: it does not hold a
# worker's Celery thread for minutes, and a warm shutdown waits this long at most.
TASK_SECONDS = 20.0


def endpoint_backlog_publish_on_commit(*, endpoint_id: str) -> None:
    """Start clearing the endpoint's backlog once the current transaction commits."""
    transaction.on_commit(lambda: _publish(endpoint_id))


def endpoint_retired_received(sender: object, *, endpoint_id: str, **_: object) -> None:
    """The receiver of webhooks.signals.endpoint_retired (connected in deliveries/apps.py)."""
    endpoint_backlog_publish_on_commit(endpoint_id=endpoint_id)


def _publish(endpoint_id: str) -> None:
    try:
        app.send_task(CLEAR_TASK, args=[endpoint_id])
    except Exception:  # the broker is down: the scheduler's sweep finds the work anyway
        logger.warning("could not publish the backlog job of %s", endpoint_id, exc_info=True)


def endpoint_backlog_run(*, endpoint_id: str) -> None:
    """The Celery task's work: TASK_SECONDS of batches, then the rest in a new message."""
    if not endpoint_backlog_clear(
        endpoint_id=endpoint_id, deadline=time.monotonic() + TASK_SECONDS
    ):
        _publish(endpoint_id)


def endpoint_backlog_clear(*, endpoint_id: str, deadline: float | None = None) -> bool:
    """Park or delete what the endpoint left behind, batch after batch, until done or
    `deadline` (time.monotonic()); True when nothing is left to do."""
    while deadline is None or time.monotonic() < deadline:
        endpoint = (
            Endpoint.all_objects.filter(pk=endpoint_id).values("is_active", "deleted_at").first()
        )
        if endpoint is None or endpoint["is_active"]:
            return True  # gone already, or active again: nothing to park
        if endpoint["deleted_at"] is None:
            # Parking is done by batches that stop when the endpoint is active again.
            if _park(endpoint_id, deadline):
                return True
            continue
        if _delete_batch(endpoint_id):
            continue
        if _delete_endpoint(endpoint_id):
            return True
        time.sleep(0.05)  # a recorder holds its last rows for a moment
    return False


def _park(endpoint_id: str, deadline: float | None) -> bool:
    parked = deliveries_kill_for_endpoint(
        endpoint_id=endpoint_id, reason=DEACTIVATED_REASON, deadline=deadline
    )
    if not Delivery.objects.filter(endpoint_id=endpoint_id, status__in=WAITING).exists():
        return True
    if not parked:
        time.sleep(0.05)  # another runner holds the rows left: look again in a moment
    return False


def _delete_batch(endpoint_id: str) -> int:
    """Delete up to DELETE_BATCH of the endpoint's deliveries; how many.

    The rows are locked first: a recorder writes an attempt only after updating its
    delivery, so it either finished before (its attempt is deleted with the delivery) or
    finds the delivery gone and writes nothing — never an attempt of a deleted delivery.
    """
    with transaction.atomic():
        ids = list(
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(endpoint_id=endpoint_id)
            .values_list("id", flat=True)[:DELETE_BATCH]
        )
        if ids:
            # Their dead letters (the queue's own foreign key follows no deletion), then
            # the ORM's cascade: attempts and whatever else points at a delivery, a
            # statement per table for the whole batch.
            deliveries_deleting_send(delivery_ids=ids)
            Delivery.objects.filter(pk__in=ids).delete()
    return len(ids)


def _delete_endpoint(endpoint_id: str) -> bool:
    """Delete the endpoint row once no delivery of it is left; False if one still is (a
    recorder held it, or a delivery committed late): the caller goes round again."""
    with transaction.atomic():
        # Waits for any transaction still inserting a delivery of it (their foreign key
        # check holds a share lock on this row), so the check below sees their rows.
        locked = Endpoint.all_objects.select_for_update().filter(pk=endpoint_id).first()
        if locked is None:
            return True
        if Delivery.objects.filter(endpoint_id=endpoint_id).exists():
            return False
        locked.delete()
    logger.info("endpoint %s deleted with all its deliveries", endpoint_id)
    return True


def endpoint_backlogs_waiting() -> list[str]:
    """Endpoints with work left: being deleted, or inactive with pending deliveries.

    Deleted ones through the partial index `endpoint_deleting`; inactive ones by a skip
    scan of `delivery_endpoint_due` (one probe per endpoint with pending deliveries,
    however deep their backlogs), as claims find due endpoints."""
    deleting = list(
        Endpoint.all_objects.filter(deleted_at__isnull=False).values_list("pk", flat=True)[
            :SWEEP_LIMIT
        ]
    )
    postgresql = connection.vendor == "postgresql"
    sql = INACTIVE_WITH_PENDING if postgresql else INACTIVE_WITH_PENDING_SQLITE
    with connection.cursor() as cursor:
        cursor.execute(sql, {"limit": SWEEP_LIMIT})
        inactive = [row[0] for row in cursor.fetchall()]
    return [*deleting, *inactive]


def endpoint_backlogs_work(*, time_budget: float) -> bool:
    """The scheduler's share: carry on every backlog job left undone (a task killed
    midway, a message lost), within `time_budget` seconds; True when none is left."""
    deadline = time.monotonic() + time_budget
    for endpoint_id in endpoint_backlogs_waiting():
        if not endpoint_backlog_clear(endpoint_id=endpoint_id, deadline=deadline):
            return False
    return True
