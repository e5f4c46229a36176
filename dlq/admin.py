from __future__ import annotations

from django.contrib import admin

from dlq.models import DeadLetter


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    list_display = ["id", "event_type", "reason", "dead_at", "replayed_at"]
    list_filter = ["replayed_at"]
    search_fields = ["id", "event_type", "reason"]
    raw_id_fields = ["delivery", "event", "endpoint", "tenant"]
