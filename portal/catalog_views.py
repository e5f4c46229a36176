"""The portal's event-type catalog (subscribe, send an example) and filter editor: thin —
check the session, call one selector or service, render."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from console.filter_editor import filter_editor_opened, filter_editor_saved, filter_editor_tried
from core.exceptions import HomingError, InvalidInput
from deliveries.intake.ingest import endpoint_send_test
from portal import selectors as portal_selectors
from portal.access import portal_page, portal_page_read_only_ok
from portal.views import _done, _endpoint, _event_types, _failed, _page, _scope
from webhooks.models import EventType
from webhooks.services import endpoints as endpoint_services
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
    editor = filter_editor_opened(
        scope=_scope(request), endpoint=_endpoint(request, pk), event_types=_event_types(request)
    )
    return _page(request, "portal/filter.html", editor.context, status=editor.status)


@require_POST
@portal_page_read_only_ok  # trying changes nothing
def filter_editor_try(request: HttpRequest, pk: str) -> HttpResponse:
    editor = filter_editor_tried(
        scope=_scope(request),
        endpoint=_endpoint(request, pk),
        event_types=_event_types(request),
        form=request.POST,
    )
    return _page(request, "portal/filter.html", editor.context, status=editor.status)


@require_POST
@portal_page  # a read-only session gets 403
def filter_editor_save(request: HttpRequest, pk: str) -> HttpResponse:
    found = _endpoint(request, pk)
    editor = filter_editor_saved(
        scope=_scope(request), endpoint=found, event_types=_event_types(request), form=request.POST
    )
    if editor is None:
        return _done("portal:endpoint", "saved", pk=found.pk)
    return _page(request, "portal/filter.html", editor.context, status=editor.status)
