from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.ids import id_field


class Tenant(models.Model):
    id = id_field("ten")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Backpressure overrides (manage.py tenant_limits); null follows the setting
    # (HOMING_TENANT_EVENT_RATE, HOMING_TENANT_MAX_BACKLOG). event_rate 0: no rate limit
    # for this tenant whatever the setting says.
    event_rate = models.PositiveIntegerField(
        null=True, blank=True, help_text="Events per second; empty: the setting; 0: no limit."
    )
    max_backlog = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Unfinished deliveries; empty: the setting."
    )

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    """An API key; only its SHA-256 is stored, the key itself is shown once."""

    id = id_field("key")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    # Authentication looks a key up by its hash: the unique index serves that query.
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise a key")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant})"


class LiveEndpoints(models.Manager["Endpoint"]):
    """Endpoints that are not being deleted: what every API, console and count sees."""

    def get_queryset(self) -> models.QuerySet[Endpoint]:
        return super().get_queryset().filter(deleted_at__isnull=True)


class ConsumerKey(models.Model):
    """A key for one of the tenant's customers (`hoc_…`): the tenant's REST API narrowed to
    the endpoints of `owner`. Only its SHA-256 is stored; the key is shown once."""

    id = id_field("ck")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="consumer_keys")
    owner = models.CharField(max_length=255)
    description = models.CharField(max_length=500, blank=True, default="")
    # Authentication looks a key up by its hash: the unique index serves that query.
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise a key")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # GET /consumer-keys: a tenant's keys on the keyset (created_at, id).
            models.Index(fields=["tenant", "-created_at", "-id"], name="consumerkey_tenant_keyset"),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.owner})"


class Endpoint(models.Model):
    class Circuit(models.TextChoices):
        CLOSED = "closed"  # deliveries flow
        OPEN = "open"  # deliveries wait, unclaimed, until the next probe
        HALF_OPEN = "half_open"  # one probe in flight

    id = id_field("ep")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="endpoints")
    url = models.URLField(max_length=2048)
    description = models.CharField(max_length=500, blank=True, default="")
    event_types = models.JSONField(default=list, blank=True)
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    headers = models.JSONField(default=dict, blank=True)
    # Which events it takes besides `event_types` (webhooks/filters.py): its JSON encrypted
    # like the secret (webhooks/services/endpoint_filters.py); empty: all. Read by routing,
    # so a change to it bumps the tenant's routing version (migration 0013's trigger).
    filter = models.TextField(blank=True, default="")
    is_active = models.BooleanField(default=True)
    # The tenant's own name for the customer this endpoint belongs to (null: none);
    # consumer keys and portal sessions see only the endpoints of their owner.
    owner = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 (API shows null)
    # The signing secret, encrypted (core.crypto); only services decrypt it.
    secret = models.TextField()
    # Secrets replaced within the rotation grace, still signing until their expiry:
    # [{"secret": <encrypted>, "expires_at": <ISO 8601>}], newest first.
    previous_secrets = models.JSONField(default=list, blank=True)
    # How webhooks are signed: `hmac-sha256` (v1, a `whsec_` secret) or `ed25519` (v1a, a
    # `whsk_` signing key whose public key the receiver verifies with).
    signing = models.CharField(max_length=16, default="hmac-sha256")
    # OAuth2 client credentials the sender fetches a bearer token with (CONTRACT section
    # 2), or null: {"type", "token_url", "client_id", "client_secret": <encrypted>,
    # "scope", "audience"}.
    auth = models.JSONField(null=True, blank=True)
    # The client certificate chain and key presented to the receiver (mutual TLS), one
    # PEM string encrypted like the secret; empty: none.
    tls_client_certificate = models.TextField(blank=True, default="")
    # Health (CONTRACT section 2), written by the recording service, read-only in the API.
    circuit_state = models.CharField(max_length=16, choices=Circuit.choices, default=Circuit.CLOSED)
    consecutive_failures = models.PositiveIntegerField(default=0)
    failing_since = models.DateTimeField(null=True, blank=True)  # None: last attempt succeeded
    disabled_reason = models.CharField(max_length=500, blank=True, default="")
    # While the circuit is not closed: when the next probe may be sent.
    probe_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Set by DELETE: the endpoint is gone for the tenant at once (hidden by `objects`,
    # inactive) while a background job removes its deliveries in batches, then the row
    # (deliveries/lifecycle/endpoint_backlogs.py).
    deleted_at = models.DateTimeField(null=True, blank=True)

    all_objects = models.Manager()
    objects = LiveEndpoints()

    class Meta:
        # The default (admin, DRF, a tenant's `endpoints`) hides deleted endpoints
        # everywhere unless a caller asks `all_objects`; foreign keys (a delivery's
        # `endpoint`) still reach one being deleted.
        default_manager_name = "objects"
        base_manager_name = "all_objects"
        indexes = [
            # The backlog job's sweep: endpoints whose deletion is still under way.
            models.Index(
                fields=["deleted_at"],
                name="endpoint_deleting",
                condition=Q(deleted_at__isnull=False),
            ),
            # Every claim reads the endpoints whose circuit is not closed (a small set) to
            # leave their deliveries alone, and picks those due a probe.
            models.Index(
                fields=["probe_at"], name="endpoint_circuit", condition=~Q(circuit_state="closed")
            ),
            # GET /endpoints: a tenant's endpoints on the keyset (created_at, id), newest
            # first; also ingestion's active lookup and the per-tenant limit's count.
            models.Index(fields=["tenant", "-created_at", "-id"], name="endpoint_tenant_keyset"),
            # An owner's endpoints (consumer keys, the portal, GET /endpoints?owner=).
            models.Index(fields=["tenant", "owner"], name="endpoint_tenant_owner"),
        ]

    def __str__(self) -> str:
        return self.url

    def matches(self, event_type: str) -> bool:
        """Empty `event_types` matches everything; `order.*` matches `order.` prefixes.
        Operational events (`homing.*`) go only where they are named explicitly."""
        if event_type.startswith("homing."):
            return any(p in (event_type, "homing.*") for p in self.event_types)
        if not self.event_types:
            return True
        for pattern in self.event_types:
            if pattern == event_type or pattern == "*":
                return True
            if pattern.endswith(".*") and event_type.startswith(pattern[:-1]):
                return True
        return False


class RoutingVersion(models.Model):
    """Which state of a tenant's routing (active endpoints and their event_types) is current.

    Written only by PostgreSQL triggers on the endpoint table (migration 0006), in the
    transaction of any change that alters routing, from a sequence: a number is never
    reused, not even after a rollback. Ingestion caches routing per process and inserts
    only while this number is the one it cached (deliveries/intake/routing.py).
    """

    # No foreign-key constraint: a tenant's deletion removes its endpoints, whose triggers
    # write this row again; a row left behind by a deleted tenant is harmless.
    tenant = models.OneToOneField(
        Tenant, primary_key=True, on_delete=models.CASCADE, db_constraint=False, related_name="+"
    )
    version = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.tenant_id} v{self.version}"


class Event(models.Model):
    id = id_field("evt")
    # No index of its own: `event_tenant_keyset` leads with the tenant and serves every
    # lookup by it (one index less to write per ingested event).
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    type = models.CharField(max_length=255)
    data = models.JSONField()
    # Deliveries of events with one key go to each endpoint one at a time, in order.
    ordering_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 (null: no key)
    created_at = models.DateTimeField(auto_now_add=True)
    # The W3C trace context the event came with (core/tracing.py: `traceparent`, and
    # `tracestate` after a newline), so that every attempt, however late, joins that trace.
    trace_context = models.TextField(null=True, blank=True)  # noqa: DJ001 (null: none sent)

    class Meta:
        indexes = [
            # GET /events on the keyset (created_at, id) newest first, optionally ?type=.
            models.Index(fields=["tenant", "-created_at", "-id"], name="event_tenant_keyset"),
            models.Index(
                fields=["tenant", "type", "-created_at", "-id"], name="event_tenant_type_keyset"
            ),
            # The retention purge walks events oldest first, across tenants, by keyset.
            models.Index(fields=["created_at", "id"], name="event_created"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"


class EventType(models.Model):
    """An entry of a tenant's event-type catalog: what a type means and carries (a JSON
    Schema 2020-12 of its `data`, examples). The portal shows it to consumers; with
    HOMING_VALIDATE_EVENTS the schema checks events of the type as they come in."""

    id = id_field("et")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="event_types")
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    schema = models.JSONField(null=True, blank=True)  # null: any data
    examples = models.JSONField(default=list, blank=True)  # `data` objects
    deprecated = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # One entry per name; also serves GET /event-types/{name} and the schema
            # lookup of each validated ingestion (tenant, name = ANY(types)).
            models.UniqueConstraint(fields=["tenant", "name"], name="eventtype_tenant_name"),
        ]
        indexes = [
            # GET /event-types on the keyset (created_at, id), newest first.
            models.Index(fields=["tenant", "-created_at", "-id"], name="eventtype_tenant_keyset"),
        ]

    def __str__(self) -> str:
        return self.name


class IdempotencyRecord(models.Model):
    """What the first request with an Idempotency-Key answered (Stripe's pattern)."""

    class Status(models.TextChoices):
        PROCESSING = "processing"
        COMPLETED = "completed"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROCESSING)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            # The atomic claim: of concurrent requests with one key, one insert wins.
            models.UniqueConstraint(fields=["tenant", "key"], name="idempotency_tenant_key"),
            models.CheckConstraint(
                condition=Q(status="processing") | Q(response_status__isnull=False),
                name="idempotency_completed_has_response",
            ),
        ]
        indexes = [
            # The purge job deletes expired records.
            models.Index(fields=["expires_at"], name="idempotency_expires"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"
