from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.ids import id_field
from deliveries.models import Delivery
from webhooks.models import Endpoint, Event, Tenant


class DeadLetter(models.Model):
    """A delivery that gave up; kept (marked replayed) after a replay.

    Discarding keeps the row (the delivery stays `dead`) but takes it out of the queue:
    lists, counts and replays skip rows with `discarded_at`.
    """

    id = id_field("dl")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    # Neither holds its row nor follows it: retention drops whole partitions of history
    # (DESIGN.md 25), which must neither wait on nor cascade into a waiting dead letter.
    # Deleting an endpoint or a tenant removes its dead letters (the FKs below, and
    # dlq/services/dead_letters.py for an endpoint's batches).
    delivery = models.ForeignKey(
        Delivery, on_delete=models.DO_NOTHING, db_constraint=False, related_name="dead_letters"
    )
    event = models.ForeignKey(
        Event, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="+")
    event_type = models.CharField(max_length=255)
    reason = models.CharField(max_length=500)
    dead_at = models.DateTimeField()
    replayed_at = models.DateTimeField(null=True, blank=True)
    discarded_at = models.DateTimeField(null=True, blank=True)
    # What the event and delivery rows are re-created from when a replay finds them gone
    # (dlq/services/kept_history.py): the same webhook-id, homing-sequence and body bytes.
    # Copied when the delivery died; null only on a letter whose rows were gone already
    # when they were first kept (`kept` is False).
    sequence = models.BigIntegerField(null=True, blank=True)
    attempt_count = models.PositiveIntegerField(null=True, blank=True)
    delivery_created_at = models.DateTimeField(null=True, blank=True)
    event_data = models.JSONField(null=True, blank=True)
    event_created_at = models.DateTimeField(null=True, blank=True)
    event_ordering_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 (null: no key)
    event_trace_context = models.TextField(null=True, blank=True)  # noqa: DJ001 (null: none sent)

    class Meta:
        indexes = [
            # GET /dead-letters newest first and its filters.
            models.Index(fields=["tenant", "-dead_at"], name="deadletter_tenant_dead"),
            # The metric of the oldest dead letter still waiting for a replay.
            models.Index(
                fields=["dead_at"], name="deadletter_waiting", condition=Q(replayed_at__isnull=True)
            ),
            # The console's /dead-letters/ across tenants, newest first, keyset on
            # (dead_at, id); also the dashboard's "failing most" over recent ones.
            models.Index(
                fields=["-dead_at", "-id"],
                name="deadletter_queue",
                condition=Q(discarded_at__isnull=True),
            ),
            # The console's /dead-letters/?endpoint= and the endpoint page's queue count.
            models.Index(
                fields=["endpoint", "-dead_at"],
                name="deadletter_endpoint_dead",
                condition=Q(discarded_at__isnull=True),
            ),
            # "Replay all N matching" counts the waiting letters of a tenant, an endpoint
            # or an event type: index-only counts instead of visiting 100,000 rows.
            models.Index(
                fields=["tenant", "dead_at"],
                name="deadletter_waiting_tenant",
                condition=Q(replayed_at__isnull=True, discarded_at__isnull=True),
            ),
            models.Index(
                fields=["endpoint", "dead_at"],
                name="deadletter_waiting_endpoint",
                condition=Q(replayed_at__isnull=True, discarded_at__isnull=True),
            ),
            models.Index(
                fields=["event_type", "dead_at"],
                name="deadletter_waiting_type",
                condition=Q(replayed_at__isnull=True, discarded_at__isnull=True),
            ),
            # Dashboard count and oldest age of the queue (waiting: neither replayed nor
            # discarded), and the replay jobs' batches (in id order).
            models.Index(
                fields=["dead_at", "id"],
                name="deadletter_queue_waiting",
                condition=Q(replayed_at__isnull=True, discarded_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.reason}"

    @property
    def kept(self) -> bool:
        """True when the letter holds what a replay needs to re-create its history."""
        return self.event_created_at is not None and self.sequence is not None


class ReplayJob(models.Model):
    """A bulk replay running in the background, a batch per short transaction.

    `criteria` is what matched (ids, tenant, endpoint, event type, ...); `cursor` is the
    last dead-letter id handled, so a job whose process died resumes where it stopped.
    Only letters that died before the job was created are in it (`created_at`), so new
    failures during a long replay do not extend it.
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        FINISHED = "finished"

    id = id_field("rpj")
    criteria = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)  # handled: replayed or skipped
    replayed = models.PositiveIntegerField(default=0)
    cursor = models.CharField(max_length=32, blank=True, default="")
    requested_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()  # heartbeat: a running job idle too long is resumed
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The resume sweep: running jobs whose heartbeat is old.
            models.Index(
                fields=["updated_at"], name="replayjob_running", condition=Q(status="running")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.done}/{self.total}"

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, self.done * 100 // self.total)
