from __future__ import annotations

from django.contrib import admin

from webhooks.models import ApiKey, Endpoint, Event, Tenant


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "created_at"]
    search_fields = ["name", "id"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "tenant", "created_at", "revoked_at"]
    readonly_fields = ["key_hash", "prefix", "tenant", "created_at"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ["url", "tenant", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["url", "id"]
    exclude = ["secret", "previous_secret"]  # signing secrets are not for display


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "tenant", "created_at"]
    search_fields = ["id", "type"]
    list_select_related = ["tenant"]
