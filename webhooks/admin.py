from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.crypto import UNREADABLE, opened
from core.exceptions import InvalidInput
from webhooks.models import ApiKey, ConsumerKey, Endpoint, Event, Tenant
from webhooks.secrets import HMAC_SHA256, SIGNING_SCHEMES
from webhooks.services.endpoint_filters import endpoint_filter
from webhooks.services.endpoint_rules import endpoint_fields_check
from webhooks.services.endpoints import (
    ENDPOINT_FIELDS,
    endpoint_create,
    endpoint_delete,
    endpoint_headers,
    endpoint_limit_check,
    endpoint_update,
)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "created_at"]
    search_fields = ["name", "id"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "tenant", "created_at", "revoked_at"]
    readonly_fields = ["key_hash", "prefix", "tenant", "created_at"]


@admin.register(ConsumerKey)
class ConsumerKeyAdmin(admin.ModelAdmin):
    """Made through the API (the key is shown once there); here to see and revoke."""

    list_display = ["prefix", "owner", "tenant", "created_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["owner", "prefix"]
    readonly_fields = ["key_hash", "prefix", "tenant", "owner", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


# `auth` holds a write-only (encrypted) client secret and `tls_client_certificate` a
# private key: set through the API, console or portal, which never show them back; the
# admin would show the ciphertext.
WRITE_ONLY_FIELDS = ("auth", "tls_client_certificate")
ADMIN_FIELDS = [name for name in ENDPOINT_FIELDS if name not in WRITE_ONLY_FIELDS]


class EndpointForm(forms.ModelForm):
    """The admin's endpoint form checks fields with the API's rules (endpoint_rules)."""

    url = forms.CharField(max_length=2048, strip=False)  # checked by endpoint_rules
    signing = forms.ChoiceField(
        choices=[(scheme, scheme) for scheme in SIGNING_SCHEMES], required=False
    )

    # Stored encrypted (endpoint_filters): edited as JSON, sealed by the services on save.
    filter = forms.JSONField(required=False)

    class Meta:
        model = Endpoint
        fields = ["tenant", *ADMIN_FIELDS]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unreadable: set[str] = set()
        if self.instance.pk:  # stored encrypted: the form shows and compares plain values
            endpoint = self.instance
            self._show("headers", opened(lambda: endpoint_headers(endpoint=endpoint)))
            self._show("filter", opened(lambda: endpoint_filter(endpoint=endpoint)))

    def _show(self, name: str, value: Any) -> None:
        """The plain value; one no key opens shows empty, says so, and is left as stored
        unless replaced (clean skips it)."""
        if value is UNREADABLE:
            self.unreadable.add(name)
            self.initial[name] = None
            self.fields[name].help_text = (
                "Cannot be read: no key of HOMING_ENCRYPTION_KEY opens the stored value (the "
                "key changed without a rotation). Left as it is unless you replace it here."
            )
        else:
            self.initial[name] = value

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if not cleaned.get("signing"):  # left out: the endpoint's scheme, or the default
            cleaned["signing"] = self.instance.signing or HMAC_SHA256
        kept = self.unreadable - set(self.changed_data)  # stored as it is: not checked
        checked = {
            name: cleaned[name] for name in ADMIN_FIELDS if name in cleaned and name not in kept
        }
        try:
            cleaned.update(endpoint_fields_check(fields=checked))
            if self.instance._state.adding and cleaned.get("tenant"):
                endpoint_limit_check(tenant=cleaned["tenant"])
        except InvalidInput as exc:
            name = exc.field.split(".", 1)[0]  # `filter.data.amount.$gte` is the filter's
            detail = exc.detail if name == exc.field else f"{exc.field}: {exc.detail}"
            self.add_error(name if name in self.fields else None, detail)
        return cleaned


HEALTH_FIELDS = ["circuit_state", "consecutive_failures", "failing_since", "disabled_reason"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    """Saves go through the services, as the API's do: a new endpoint gets a secret (and
    counts against the tenant's limit); a deactivation parks the pending deliveries."""

    form = EndpointForm
    list_display = ["url", "tenant", "owner", "is_active", "circuit_state", "created_at"]
    list_filter = ["is_active", "circuit_state"]
    search_fields = ["url", "id", "owner"]
    list_select_related = ["tenant"]

    def get_readonly_fields(self, request: HttpRequest, obj: Endpoint | None = None) -> list[str]:
        # Health is the recording service's to write; shown, never edited.
        return [*HEALTH_FIELDS, "tenant"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Endpoint, form: Any, change: bool) -> None:
        fields = {name: form.cleaned_data[name] for name in ADMIN_FIELDS}
        if change:
            # The row as it was: endpoint_update must see the endpoint was active.
            original = Endpoint.objects.get(pk=obj.pk)
            changed = {name: fields[name] for name in form.changed_data if name in fields}
            endpoint_update(endpoint=original, **changed)
        else:
            created = endpoint_create(tenant=form.cleaned_data["tenant"], **fields)
            obj.pk = created.pk
            obj._state.adding = False
        obj.refresh_from_db()

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        # Django's confirmation page would load every delivery and attempt of the
        # endpoints to list them (150,000 rows for one deep backlog): name the endpoints.
        endpoints = list(objs)
        return [str(e) for e in endpoints], {"endpoints": len(endpoints)}, set(), []

    def delete_model(self, request: HttpRequest, obj: Endpoint) -> None:
        # As DELETE /endpoints/{id}: hidden at once, its backlog removed in the background.
        endpoint_delete(endpoint=obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for endpoint in queryset:
            endpoint_delete(endpoint=endpoint)


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "tenant", "created_at"]
    search_fields = ["id", "type"]
    list_select_related = ["tenant"]
