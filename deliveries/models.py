from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.ids import id_field
from deliveries.statuses import UNFINISHED, DeliveryStatus
from webhooks.models import Endpoint, Event, Tenant

# Pending deliveries, as the index `delivery_due_by_time` (time order, all endpoints)
# knows them: a filter on this lets a query walk it (see that index's comment).
PENDING_IN_TIME_ORDER = Q(status=DeliveryStatus.PENDING, attempt_count__gte=0)


class Delivery(models.Model):
    """One event on its way to one endpoint; the database is its queue."""

    Status = DeliveryStatus  # deliveries/statuses.py: every app may import it

    id = id_field("dlv")
    # No index of their own on `tenant` and `endpoint`: `delivery_tenant_created` and
    # `delivery_endpoint_sequence` lead with them and serve every lookup by either (each
    # index more is written by every ingested delivery: measured in bench/README.md).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    # No constraint in the database: events and deliveries are partitioned by time
    # (lifecycle/partitions.py) and a constraint between partitions would make every drop
    # check the other table. Deleting goes children first (retention, endpoint deletion).
    event = models.ForeignKey(
        Event, on_delete=models.CASCADE, related_name="deliveries", db_constraint=False
    )
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Every attempt ever made; `attempt_number` of the Attempt rows.
    attempt_count = models.PositiveIntegerField(default=0)
    # attempt_count when the current schedule began (a replay starts a fresh schedule).
    schedule_offset = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    # 1, 2, 3, … per endpoint in commit order, without gaps (services/sequences.py); the
    # `homing-sequence` header and the catch-up feed's keyset.
    sequence = models.BigIntegerField()
    # Its event's ordering key while the delivery is in its key's line at this endpoint
    # (services/ordering.py); cleared when a replay or retry takes it out of the line.
    ordering_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 (null: no key)
    # The delivery this held one waits for (null: none).
    blocked_by = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001
    # When it became the first of its key's line: HOMING_ORDERING_MAX_BLOCK counts from it.
    head_since = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [
            # The scheduler, the idle poll and the gauges: pending deliveries in time order,
            # whatever their endpoint. `attempt_count >= 0` always holds (the column's
            # check); claims never say it, so they cannot walk this index: the planner
            # costed it like the endpoint's own below and sometimes walked it for one
            # endpoint's share, past every other endpoint's due rows (38-95 ms a claim).
            # Queries that want it filter on PENDING_IN_TIME_ORDER.
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due_by_time",
                condition=PENDING_IN_TIME_ORDER,
            ),
            # Claims, endpoint by endpoint: which endpoints have pending deliveries (a skip
            # scan) and each one's oldest due rows, without touching the others' backlogs.
            models.Index(
                fields=["endpoint", "next_attempt_at"],
                name="delivery_endpoint_due",
                condition=Q(status=DeliveryStatus.PENDING),
            ),
            # The scheduler's lease sweep: deliveries whose worker died mid-attempt.
            models.Index(
                fields=["lease_expires_at"],
                name="delivery_lease",
                condition=Q(status=DeliveryStatus.DELIVERING),
            ),
            # Ordering: the last unfinished delivery of a key at an endpoint (the one a new
            # delivery of the key waits for), and the delivery waiting for a finished one.
            models.Index(
                fields=["endpoint", "ordering_key", "-sequence"],
                name="delivery_ordering_line",
                condition=Q(ordering_key__isnull=False, status__in=list(UNFINISHED)),
            ),
            models.Index(
                fields=["blocked_by"],
                name="delivery_blocked_by",
                condition=Q(status=DeliveryStatus.HELD),
            ),
            # An endpoint's held deliveries, counted by its statistics (dlq.selectors.
            # endpoint_unfinished_counts) without walking its other deliveries or other
            # endpoints' held ones. Written only for held rows.
            models.Index(
                fields=["endpoint"],
                name="delivery_endpoint_held",
                condition=Q(status=DeliveryStatus.HELD),
            ),
            # GET /deliveries newest first, optionally ?status=.
            models.Index(fields=["tenant", "-created_at"], name="delivery_tenant_created"),
            models.Index(fields=["tenant", "status", "-created_at"], name="delivery_tenant_status"),
            # The catch-up feed walks this index. Not unique: on PostgreSQL deliveries are
            # partitioned by id and a unique index must contain it. No sequence is given
            # twice all the same: each is taken from the endpoint's SequenceCounter row,
            # locked until commit (intake/sequences.py).
            models.Index(fields=["endpoint", "sequence"], name="delivery_endpoint_sequence"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=~Q(status=DeliveryStatus.PENDING) | Q(next_attempt_at__isnull=False),
                name="delivery_pending_is_scheduled",
            ),
            models.CheckConstraint(
                condition=~Q(status=DeliveryStatus.DELIVERING) | Q(lease_expires_at__isnull=False),
                name="delivery_delivering_has_lease",
            ),
            models.CheckConstraint(
                condition=~Q(status=DeliveryStatus.HELD) | Q(blocked_by__isnull=False),
                name="delivery_held_is_blocked",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @property
    def attempts_in_schedule(self) -> int:
        return self.attempt_count - self.schedule_offset


class SequenceCounter(models.Model):
    """The last sequence given to a delivery of one endpoint, and how far retention has
    purged them. Its own row, not a column of the endpoint: ingestion locks it until
    commit (that lock is what makes sequence order commit order), and the endpoint row
    is written by health recording and read by routing triggers."""

    endpoint = models.OneToOneField(
        Endpoint, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    last = models.BigIntegerField(default=0)
    # Every sequence up to this one may have been purged: the feed answers 410 below it.
    purged_through = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.endpoint_id}: {self.last}"


class Attempt(models.Model):
    """One HTTP try of a delivery."""

    # No index of its own: `attempt_number_once` leads with it (one index less to write
    # per recorded attempt). No constraint in the database: attempts are partitioned by
    # their delivery's id and leave with its interval (lifecycle/partitions.py). On
    # PostgreSQL the primary key is (delivery_id, id): it must contain the partition key.
    delivery = models.ForeignKey(
        Delivery,
        on_delete=models.CASCADE,
        related_name="attempts",
        db_index=False,
        db_constraint=False,
    )
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    response_body = models.TextField(blank=True, default="")  # first 4 KiB

    class Meta:
        ordering = ["number"]
        constraints = [
            # A claim numbers its attempt; two records of one attempt would be a bug.
            models.UniqueConstraint(fields=["delivery", "number"], name="attempt_number_once"),
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number}"


class AttemptMinute(models.Model):
    """Attempts per minute by outcome: the console's chart and success rates read this
    small table instead of scanning attempts. Written by whoever records attempts."""

    minute = models.DateTimeField()  # the start of the minute (UTC)
    outcome = models.CharField(max_length=16)  # retry.Outcome: success, retryable, fatal
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # One row per (minute, outcome): recording upserts into it; the dashboard
            # reads a range of minutes through the same index.
            models.UniqueConstraint(fields=["minute", "outcome"], name="attempt_minute_once"),
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.outcome}: {self.count}"


class EndpointMinute(models.Model):
    """One endpoint's attempts in one minute: counts by outcome and a small fixed
    histogram of their durations (lifecycle/attempt_stats.DURATION_BOUNDS_MS). The
    endpoint statistics (GET /endpoints/{id}/stats, the console's and portal's charts)
    read a range of these rows instead of scanning attempts: a week is at most 10,080
    rows, however many attempts it held. Written by whoever records attempts."""

    # No foreign key: recording upserts these rows after its batch commits and must not
    # wait on (or fail for) an endpoint being deleted; rows of a deleted endpoint are
    # read by nothing.
    endpoint_id = models.CharField(max_length=32)  # core.ids.ID_LENGTH
    minute = models.DateTimeField()  # the start of the minute (UTC)
    success = models.PositiveIntegerField(default=0)
    retryable = models.PositiveIntegerField(default=0)
    fatal = models.PositiveIntegerField(default=0)
    # Attempts whose duration fell in (previous bound, bound] ms; d_more: above the last.
    d_25 = models.PositiveIntegerField(default=0)
    d_50 = models.PositiveIntegerField(default=0)
    d_100 = models.PositiveIntegerField(default=0)
    d_250 = models.PositiveIntegerField(default=0)
    d_500 = models.PositiveIntegerField(default=0)
    d_1000 = models.PositiveIntegerField(default=0)
    d_2500 = models.PositiveIntegerField(default=0)
    d_5000 = models.PositiveIntegerField(default=0)
    d_10000 = models.PositiveIntegerField(default=0)
    d_more = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # One row per (endpoint, minute): recording upserts into it, and the stats
            # read one endpoint's range of minutes through the same index.
            models.UniqueConstraint(fields=["endpoint_id", "minute"], name="endpoint_minute_once"),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint_id} {self.minute:%Y-%m-%d %H:%M}"
