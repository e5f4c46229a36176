"""Raw dead-letter rows for staff. The platform makes them, so the admin adds none and
edits none of the fields a replay or the worker relies on."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from dlq.models import DeadLetter, ReplayJob
from dlq.services.replay import dead_letters_replay


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "tenant_name",
        "endpoint_url",
        "event_type",
        "reason",
        "dead_at",
        "replayed_at",
        "discarded_at",
    ]
    list_filter = ["replayed_at", "discarded_at"]
    list_select_related = ["tenant", "endpoint"]
    search_fields = ["id", "event_type", "reason"]
    raw_id_fields = ["delivery", "event", "endpoint", "tenant"]
    # Every field: replay and discard are actions with rules, not edits of a column.
    readonly_fields = [
        "id",
        "tenant",
        "delivery",
        "event",
        "endpoint",
        "event_type",
        "reason",
        "dead_at",
        "replayed_at",
        "discarded_at",
    ]
    actions = ["replay"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # dead letters are made by the platform when a delivery gives up

    @admin.display(description="tenant", ordering="tenant__name")
    def tenant_name(self, letter: DeadLetter) -> str:
        return letter.tenant.name

    @admin.display(description="endpoint URL")
    def endpoint_url(self, letter: DeadLetter) -> str:
        return letter.endpoint.url

    @admin.action(description="Replay the selected dead letters")
    def replay(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        selected = list(queryset.select_related("endpoint"))
        replayed = dead_letters_replay(dead_letters=selected)
        skipped = len(selected) - replayed
        self.message_user(request, f"Replayed {replayed} of {len(selected)}.")
        if skipped:
            # The same rules as the API: replayed already, delivery no longer dead, or
            # the endpoint deactivated.
            self.message_user(
                request,
                f"{skipped} skipped: already replayed, no longer dead, or endpoint inactive.",
                level=messages.WARNING,
            )


@admin.register(ReplayJob)
class ReplayJobAdmin(admin.ModelAdmin):
    list_display = ["id", "status", "done", "total", "replayed", "requested_by", "created_at"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in ReplayJob._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs come from "Replay all" in the console or the API
