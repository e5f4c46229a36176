from __future__ import annotations

from django.db import models

from core.ids import id_field
from webhooks.models import Tenant


class PortalSession(models.Model):
    """A one-time link to the consumer portal and, once opened, the browser session it
    became: one tenant, one owner, until `expires_at`. Only hashes of the link's secret and
    of the session cookie are stored."""

    id = id_field("ps")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    owner = models.CharField(max_length=255)
    read_only = models.BooleanField(default=False)
    # Opening the link looks it up by this hash (unique index).
    link_hash = models.CharField(max_length=64, unique=True)
    # Every portal page looks its session up by this hash (unique index); set on exchange.
    cookie_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)  # when the link was exchanged

    class Meta:
        indexes = [
            # Making a link deletes a few sessions that expired long ago, oldest first.
            models.Index(fields=["expires_at"], name="portalsession_expires"),
        ]

    def __str__(self) -> str:
        return f"{self.owner} ({self.tenant_id}) until {self.expires_at:%Y-%m-%d %H:%M}"
