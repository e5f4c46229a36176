"""Forms of the console: they turn query strings and POSTs into checked values."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any, cast

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.http import QueryDict
from django.utils import timezone

from core.ids import ID_LENGTH as MAX_ID_LENGTH
from dlq.selectors import Criteria

# Dead letters exist between these days; outside them a filter date is a typo, and
# 9999-12-31 overflowed `datetime` once "until" added its day (a 500).
DAY_RANGE = [
    MinValueValidator(date(2000, 1, 1), "Enter a date from 2000-01-01."),
    MaxValueValidator(date(9998, 12, 31), "Enter a date until 9998-12-31."),
]


class DeadLetterFilter(forms.Form):
    tenant = forms.CharField(required=False, max_length=40)
    endpoint = forms.CharField(required=False, max_length=40, label="Endpoint id")
    event_type = forms.CharField(required=False, max_length=255)
    reason = forms.CharField(required=False, max_length=200, label="Reason contains")
    dead_after = forms.DateField(required=False, label="Dead from", validators=DAY_RANGE)
    dead_before = forms.DateField(required=False, label="Dead until", validators=DAY_RANGE)
    replayed = forms.ChoiceField(
        required=False,
        choices=[("", "Waiting and replayed"), ("no", "Waiting only"), ("yes", "Replayed only")],
        label="Replayed",
    )

    def __init__(self, *args: Any, tenants: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].widget = forms.Select(choices=[("", "All tenants"), *tenants])

    def criteria(self) -> Criteria:
        """The filter as replay jobs and selectors take it (call after is_valid)."""
        data = self.cleaned_data
        criteria: Criteria = {}
        for name in ("tenant", "endpoint", "event_type", "reason"):
            if data.get(name):
                criteria[name] = data[name].strip()
        if data.get("dead_after"):
            criteria["dead_after"] = _day_start(data["dead_after"]).isoformat()
        if data.get("dead_before"):
            # "until" a day includes that day.
            end = _day_start(data["dead_before"]) + timedelta(days=1)
            criteria["dead_before"] = end.isoformat()
        if data.get("replayed"):
            criteria["replayed"] = data["replayed"] == "yes"
        return criteria


def _day_start(day: Any) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


class SelectionForm(forms.Form):
    """Select-many replay or discard of the rows ticked on the page."""

    MAX_IDS = 500  # a page shows fewer; more means a forged form

    action = forms.ChoiceField(choices=[("replay", "Replay"), ("discard", "Discard")])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        posted = cast(QueryDict, self.data)  # bound to request.POST by its one view
        ids = [i for i in posted.getlist("ids") if i]
        if not ids:
            raise forms.ValidationError("Select at least one dead letter.")
        if len(ids) > self.MAX_IDS:
            raise forms.ValidationError(f"At most {self.MAX_IDS} dead letters at a time.")
        if any(len(i) > MAX_ID_LENGTH or not i.isprintable() for i in ids):
            # No id holds a NUL byte, which PostgreSQL would refuse (a 500): forged.
            raise forms.ValidationError("Not a dead letter id.")
        cleaned["ids"] = ids
        return cleaned


class ReplayAllForm(DeadLetterFilter):
    """ "Replay all N matching": `expected` is the N the operator confirmed."""

    expected = forms.IntegerField(min_value=0)
