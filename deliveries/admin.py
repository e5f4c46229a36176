"""Raw deliveries and attempts for staff. They are made and moved by the platform: no
"Add", and no editing of the columns the worker's claims and schedule depend on."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from deliveries.models import Attempt, Delivery


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    readonly_fields = [
        "number",
        "started_at",
        "duration_ms",
        "status_code",
        "error",
        "response_body",
    ]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # an attempt is a record of an HTTP try that happened


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "status",
        "tenant_name",
        "endpoint_url",
        "attempt_count",
        "next_attempt_at",
        "last_error",
    ]
    list_filter = ["status"]
    search_fields = ["id", "event__id"]
    list_select_related = ["endpoint", "tenant"]
    raw_id_fields = ["event", "endpoint", "tenant"]
    # Status, schedule and lease belong to the worker (a conditional update elsewhere
    # would race an edit here); use Retry now or a replay instead.
    readonly_fields = [
        "id",
        "tenant",
        "event",
        "endpoint",
        "status",
        "attempt_count",
        "schedule_offset",
        "next_attempt_at",
        "lease_expires_at",
        "last_error",
        "created_at",
        "updated_at",
    ]
    inlines = [AttemptInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # deliveries are made when an event is accepted

    @admin.display(description="tenant", ordering="tenant__name")
    def tenant_name(self, delivery: Delivery) -> str:
        return delivery.tenant.name

    @admin.display(description="endpoint URL")
    def endpoint_url(self, delivery: Delivery) -> str:
        return delivery.endpoint.url


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = ["delivery", "number", "started_at", "status_code", "duration_ms", "error"]
    list_select_related = ["delivery"]
    raw_id_fields = ["delivery"]
    readonly_fields = [
        "delivery",
        "number",
        "started_at",
        "duration_ms",
        "status_code",
        "error",
        "response_body",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
