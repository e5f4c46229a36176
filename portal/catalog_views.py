"""The portal's event-type catalog (subscribe, send an example) and filter editor: thin —
check the session, call one selector or service, render."""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from core.exceptions import HomingError, InvalidInput
from deliveries.intake.filter_trial import events_for_trial
from deliveries.intake.ingest import endpoint_send_test
from portal import selectors as portal_selectors
from portal.access import portal_page, portal_page_read_only_ok, portal_request, refuse
from portal.views import _endpoint, _event_types, _failed, _page, _scope
from webhooks.filters import event_document, filter_check, filter_explain
from webhooks.models import EventType
from webhooks.services import endpoints as endpoint_services
from webhooks.services.endpoint_filters import endpoint_filter_text
from webhooks.services.endpoint_rules import endpoint_fields_for_scope

CATALOG_NOTICES = {
    "subscribed": "Subscribed: the endpoint now receives this type.",
    "already": "That endpoint already receives this type.",
    "example": "Example sent as a test event: see it among the endpoint's deliveries.",
}


@require_GET
@portal_page
def catalog(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    return _page(
        request,
        "portal/catalog.html",
        {
            "groups": portal_selectors.event_type_catalog(tenant_id=scope.tenant_id),
            "endpoints": list(scope.narrow(endpoint_services.Endpoint.objects.order_by("url"))),
            "catalog_notice": CATALOG_NOTICES.get(request.GET.get("done", "")),
        },
    )


@require_POST
@portal_page
def catalog_action(request: HttpRequest, name: str) -> HttpResponse:
    """Subscribe an endpoint of the owner to a type, or send it the type's example."""
    scope = _scope(request)
    entry = EventType.objects.filter(tenant_id=scope.tenant_id, name=name).first()
    if entry is None:
        raise Http404("No such event type.")
    found = _endpoint(request, request.POST.get("endpoint", ""))
    back = reverse("portal:catalog")
    try:
        if request.POST.get("action") == "subscribe":
            if not found.event_types or name in found.event_types:
                return _catalog_done("already")
            fields = endpoint_fields_for_scope(
                scope=scope, fields={"event_types": [*found.event_types, name]}
            )
            endpoint_services.endpoint_update(endpoint=found, **fields)
            return _catalog_done("subscribed")
        if request.POST.get("action") == "example":
            if not entry.examples:
                raise InvalidInput("examples", "This type has no example to send.")
            endpoint_send_test(endpoint=found, event_type=name, data=entry.examples[0])
            return _catalog_done("example")
    except HomingError as error:
        return _failed(request, error, back)
    raise Http404("Unknown action.")


def _catalog_done(done: str) -> HttpResponse:
    return redirect(f"{reverse('portal:catalog')}?{urlencode({'done': done})}")


@require_GET
@portal_page
def filter_editor(request: HttpRequest, pk: str) -> HttpResponse:
    found = _endpoint(request, pk)
    text = endpoint_filter_text(endpoint=found)
    types = _event_types(request)
    return _editor(request, found, text=text, event_type=types[0] if types else "")


@require_POST
@portal_page_read_only_ok  # trying changes nothing; saving checks read-only itself
def filter_editor_post(request: HttpRequest, pk: str) -> HttpResponse:
    found = _endpoint(request, pk)
    text = request.POST.get("filter", "")
    event_type = request.POST.get("event_type", "")
    if request.POST.get("action") == "save":
        if _scope(request).read_only:
            return refuse(request, "This portal session is read only: nothing was changed.")
        try:
            endpoint_services.endpoint_update(endpoint=found, filter=_parsed(text))
        except InvalidInput as error:
            return _editor(request, found, text=text, event_type=event_type, error=error)
        return redirect(f"{reverse('portal:endpoint', kwargs={'pk': pk})}?notice=saved")
    return _editor(request, found, text=text, event_type=event_type, tried=True)


def _parsed(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput("filter", f"Not JSON: {exc}") from None


def _editor(
    request: HttpRequest,
    found: Any,
    *,
    text: str,
    event_type: str,
    tried: bool = False,
    error: InvalidInput | None = None,
) -> HttpResponse:
    """The editor, with the filter tried against the last events of the chosen type."""
    results = []
    if error is None:
        try:
            spec = filter_check(_parsed(text))
        except InvalidInput as refused:
            error = refused
    if error is None and event_type:
        scope = portal_request(request).scope
        for event in events_for_trial(scope=scope, event_type=event_type):
            document = event_document(event.type, event.data, event.ordering_key)
            matches, explanation = filter_explain(spec, document)
            data = json.dumps(event.data, ensure_ascii=False, separators=(", ", ": "))
            results.append(
                {"event": event, "data": data, "matches": matches, "explanation": explanation}
            )
    context = {
        "endpoint": found,
        "filter_text": text,
        "event_type": event_type,
        "event_types": _event_types(request),
        "results": results,
        "matched": sum(1 for r in results if r["matches"]),
        "tried": tried,
        "error": error,
    }
    return _page(request, "portal/filter.html", context, status=400 if error else 200)
