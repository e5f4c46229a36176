from __future__ import annotations

from django.contrib import admin

from deliveries.models import Attempt, Delivery


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    readonly_fields = [
        "number",
        "started_at",
        "duration_ms",
        "status_code",
        "error",
        "response_body",
    ]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "status", "endpoint", "attempt_count", "next_attempt_at", "last_error"]
    list_filter = ["status"]
    search_fields = ["id", "event__id"]
    list_select_related = ["endpoint"]
    raw_id_fields = ["event", "endpoint", "tenant"]
    inlines = [AttemptInline]
