"""Forms of the portal: they turn POSTs and query strings into checked values. The rules of
an endpoint stay in webhooks.services.endpoint_rules (the service raises; the view puts
the message on the field)."""

from __future__ import annotations

from typing import Any

from django import forms

from deliveries.models import Delivery


class EndpointForm(forms.Form):
    url = forms.CharField(label="URL", max_length=2048, strip=False)
    description = forms.CharField(required=False, max_length=500)
    event_types = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Event types",
        help_text="None ticked: every type.",
    )
    rate_limit = forms.IntegerField(
        required=False, min_value=1, label="Rate limit (per second)", help_text="Empty: no limit."
    )

    def __init__(self, *args: Any, event_types: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The types the tenant has sent, plus any the endpoint already has (kept on edit).
        current = list((self.initial or {}).get("event_types") or [])
        choices = list(dict.fromkeys([*event_types, *current]))
        field = self.fields["event_types"]
        assert isinstance(field, forms.ChoiceField)  # (a MultipleChoiceField, declared above)
        field.choices = [(t, t) for t in choices]

    def endpoint_fields(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "url": data["url"],
            "description": data["description"],
            "event_types": list(data["event_types"]),
            "rate_limit": data["rate_limit"],
        }


class DeliveryFilter(forms.Form):
    status = forms.ChoiceField(
        required=False, choices=[("", "Any status"), *Delivery.Status.choices]
    )
    event_type = forms.ChoiceField(required=False, label="Event type")

    def __init__(self, *args: Any, event_types: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["event_type"]
        assert isinstance(field, forms.ChoiceField)  # declared above
        field.choices = [("", "Any type"), *[(t, t) for t in event_types]]


class RecoverForm(forms.Form):
    since = forms.DateTimeField(
        label="Recover since (UTC)",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
