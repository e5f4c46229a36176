from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.ids import id_field
from deliveries.models import Delivery
from webhooks.models import Endpoint, Event, Tenant


class DeadLetter(models.Model):
    """A delivery that gave up; kept (marked replayed) after a replay."""

    id = id_field("dl")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="dead_letters")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="+")
    event_type = models.CharField(max_length=255)
    reason = models.CharField(max_length=500)
    dead_at = models.DateTimeField()
    replayed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # GET /dead-letters newest first and its filters.
            models.Index(fields=["tenant", "-dead_at"], name="deadletter_tenant_dead"),
            # The metric of the oldest dead letter still waiting for a replay.
            models.Index(
                fields=["dead_at"], name="deadletter_waiting", condition=Q(replayed_at__isnull=True)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.reason}"
