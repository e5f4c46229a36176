"""The filter editor of the console and the portal (CONTRACT sections 7 and 9), written once:
an endpoint's filter tried against the last events of a chosen type — which match, which
do not and the first clause that failed, as POST /endpoints/{id}/filter-test explains
it — then saved. The pages differ only in who asks (the Scope whose events are tried),
their URLs and who may save; the markup is templates/shared/filter_editor.html.

Trying changes nothing, so whoever may read the endpoint may try; saving goes through
endpoint_update, which checks the filter and answers an invalid one with its path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.exceptions import InvalidInput
from deliveries.intake.filter_trial import events_for_trial
from webhooks.filters import event_document, filter_check, filter_explain
from webhooks.models import Endpoint
from webhooks.scope import Scope
from webhooks.services import endpoints as endpoint_services
from webhooks.services.endpoint_filters import endpoint_filter_text


@dataclass(frozen=True)
class Editor:
    """What the editor's page renders, and the status it answers with (400: an invalid
    filter, named in the page)."""

    context: dict[str, Any]
    status: int


def filter_editor_opened(*, scope: Scope, endpoint: Endpoint, event_types: list[str]) -> Editor:
    """The editor with the saved filter (empty when it cannot be read: the page says so)
    tried on the first type."""
    text = endpoint_filter_text(endpoint=endpoint) or ""
    chosen = event_types[0] if event_types else ""
    return _editor(scope, endpoint, event_types, text=text, event_type=chosen, tried=False)


def filter_editor_tried(
    *, scope: Scope, endpoint: Endpoint, event_types: list[str], form: Mapping[str, str]
) -> Editor:
    """The posted filter tried on the posted type; nothing is saved."""
    text, chosen = form.get("filter", ""), form.get("event_type", "")
    return _editor(scope, endpoint, event_types, text=text, event_type=chosen, tried=True)


def filter_editor_saved(
    *, scope: Scope, endpoint: Endpoint, event_types: list[str], form: Mapping[str, str]
) -> Editor | None:
    """Saves the posted filter (empty: none), replacing whatever is stored, readable or
    not; None when saved, else the editor naming the fault."""
    text = form.get("filter", "")
    try:
        endpoint_services.endpoint_update(endpoint=endpoint, filter=_parsed(text))
    except InvalidInput as error:
        chosen = form.get("event_type", "")
        return _editor(
            scope, endpoint, event_types, text=text, event_type=chosen, tried=True, error=error
        )
    return None


def _parsed(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput("filter", f"Not JSON: {exc}") from None


def _editor(
    scope: Scope,
    endpoint: Endpoint,
    event_types: list[str],
    *,
    text: str,
    event_type: str,
    tried: bool,
    error: InvalidInput | None = None,
) -> Editor:
    results = []
    if error is None:
        try:
            spec = filter_check(_parsed(text))
        except InvalidInput as refused:
            error = refused
    if error is None and event_type:
        for event in events_for_trial(scope=scope, event_type=event_type):
            document = event_document(event.type, event.data, event.ordering_key)
            matches, explanation = filter_explain(spec, document)
            data = json.dumps(event.data, ensure_ascii=False, separators=(", ", ": "))
            results.append(
                {"event": event, "data": data, "matches": matches, "explanation": explanation}
            )
    context = {
        "endpoint": endpoint,
        "filter_text": text,
        # The stored filter, whatever the form holds: routing lets it match nothing.
        "filter_unreadable": endpoint_filter_text(endpoint=endpoint) is None,
        "event_type": event_type,
        "event_types": event_types,
        "results": results,
        "matched": sum(1 for r in results if r["matches"]),
        "tried": tried,
        "error": error,
    }
    return Editor(context=context, status=400 if error else 200)
