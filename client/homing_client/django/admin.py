from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from homing_client.django.models import OutboxEvent


@admin.register(OutboxEvent)
class OutboxEventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "status", "created_at", "attempts", "sent_at", "event_id"]
    list_filter = ["status", "type"]
    search_fields = ["=id", "=event_id", "type"]
    readonly_fields = [field.name for field in OutboxEvent._meta.fields]
    actions = ["send_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # rows come from publish_on_commit, in the app's own transactions

    @admin.action(description="Send the selected failed rows again")
    def send_again(self, request: HttpRequest, queryset: QuerySet[OutboxEvent]) -> None:
        # Same id, so same Idempotency-Key: a row that did reach Homing is not duplicated.
        count = queryset.filter(status=OutboxEvent.Status.FAILED).update(
            status=OutboxEvent.Status.PENDING, last_error=""
        )
        self.message_user(request, f"{count} row(s) queued again.", messages.SUCCESS)
