from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from dlq.models import DeadLetter
from dlq.services.replay import dead_letters_replay


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    list_display = ["id", "event_type", "reason", "dead_at", "replayed_at"]
    list_filter = ["replayed_at"]
    search_fields = ["id", "event_type", "reason"]
    raw_id_fields = ["delivery", "event", "endpoint", "tenant"]
    actions = ["replay"]

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
