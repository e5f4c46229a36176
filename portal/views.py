"""The consumer portal's pages: thin — check the session, call one selector or service,
render. Every query is narrowed by the session's Scope (another owner's id is a 404)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console import selectors
from console.event_types import event_types_sent
from console.paging import BadCursor
from console.transport_forms import (
    AUTH_FIELDS,
    TransportForm,
    transport_initial,
    transport_save,
)
from core.exceptions import HomingError, InvalidInput
from deliveries.intake import retries
from deliveries.intake.ingest import endpoint_send_test
from deliveries.models import Delivery
from dlq.selectors import dead_letters_in_queue
from dlq.services.replay import dead_letter_replay
from dlq.services.replay_jobs import endpoint_recover
from portal import selectors as portal_selectors
from portal.access import (
    COOKIE_NAME,
    COOKIE_PATH,
    cross_site,
    portal_context,
    portal_headers,
    portal_page,
    portal_page_read_only_ok,
    portal_request,
    refuse,
    set_session_cookie,
)
from portal.forms import DeliveryFilter, EndpointForm, RecoverForm
from portal.services.sessions import (
    PortalLinkRefused,
    portal_session_end,
    portal_session_exchange,
    portal_session_from_cookie,
)
from webhooks.models import Endpoint
from webhooks.scope import Scope
from webhooks.services import endpoints as endpoint_services
from webhooks.services.endpoint_rules import endpoint_fields_for_scope

# What a redirect after a change says; a fixed list, so a crafted ?notice= shows nothing else.
NOTICES = {
    "created": "Endpoint created. Send it a test event to check your receiver.",
    "saved": "Endpoint saved.",
    "certificate-removed": "Client certificate removed.",
    "activated": "Endpoint activated.",
    "deactivated": "Endpoint deactivated; its pending deliveries went to the dead letters.",
    "deleted": "Endpoint deleted.",
    "tested": "Test event sent: it appears below.",
    "retried": "Retry requested: one more attempt now.",
    "replayed": "Replayed: its delivery is pending again.",
    "recovering": "Replaying the dead letters of that window in the background.",
}


def _page(
    request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    notice = NOTICES.get(request.GET.get("notice", ""))
    return render(
        request,
        template,
        {**portal_context(request), "notice": notice, **context},
        status=status,
    )


def _done(name: str, notice: str, **kwargs: Any) -> HttpResponse:
    return redirect(f"{reverse(name, kwargs=kwargs)}?{urlencode({'notice': notice})}")


def _failed(request: HttpRequest, error: HomingError, back: str) -> HttpResponse:
    """A change the service refused: say why, change nothing."""
    return _page(
        request, "portal/failed.html", {"error": error.message, "back": back}, error.status_code
    )


def _scope(request: HttpRequest) -> Scope:
    return portal_request(request).scope


def _endpoint(request: HttpRequest, pk: str) -> Endpoint:
    found = _scope(request).narrow(Endpoint.objects.all()).filter(pk=pk).first()
    if found is None:
        raise Http404("No such endpoint.")
    return found


# --- opening a link ----------------------------------------------------------------------


@require_GET
def open_link(request: HttpRequest) -> HttpResponse:
    """The link's page. Its secret is in the fragment, which only the browser sees:
    portal.js posts it to `exchange`. Without a fragment, a live session goes on to its
    endpoints; no session shows a page saying so."""
    live = portal_session_from_cookie(cookie=request.COOKIES.get(COOKIE_NAME, ""))
    home = reverse("portal:endpoints") if live else ""
    return portal_headers(render(request, "portal/open.html", {"home": home}))


# No Django CSRF check (there is no session yet to hold a token; embedded, the CSRF cookie
# would be withheld): the link's one-time secret is the credential. But a forged post from
# another site would open the forger's portal in the victim's browser (login CSRF), where
# the victim might add an endpoint or secret to the forger's account: refused by origin.
@csrf_exempt
@require_POST
def exchange(request: HttpRequest) -> HttpResponse:
    if cross_site(request):
        return refuse(
            request, "This link must be opened in the portal itself, not from another site."
        )
    try:
        session, cookie = portal_session_exchange(link_token=request.POST.get("link", ""))
    except PortalLinkRefused as refused:
        return refuse(request, refused.message)
    response = redirect("portal:endpoints")
    set_session_cookie(response, cookie=cookie, expires_at=session.expires_at)
    return portal_headers(response)


@require_POST
@portal_page_read_only_ok
def log_out(request: HttpRequest) -> HttpResponse:
    portal_session_end(session=portal_request(request).portal_session)
    response = refuse(
        request, "You have left the portal. Open a new link to come back.", status=200
    )
    response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH)
    return response


# --- endpoints -------------------------------------------------------------------------


@require_GET
@portal_page
def endpoints(request: HttpRequest) -> HttpResponse:
    rows = portal_selectors.endpoints_with_health(scope=_scope(request))
    return _page(request, "portal/endpoints.html", {"rows": rows})


def _event_types(request: HttpRequest) -> list[str]:
    return event_types_sent(tenant_id=_scope(request).tenant_id)


def _save(request: HttpRequest, form: EndpointForm, endpoint: Endpoint | None) -> Endpoint | None:
    """Create or update through the service; its refusal lands on the form's field."""
    scope = _scope(request)
    try:
        fields = endpoint_fields_for_scope(scope=scope, fields=form.endpoint_fields())
        if endpoint is None:
            return endpoint_services.endpoint_create(
                tenant=scope.tenant, by_consumer=scope.is_consumer, **fields
            )
        return endpoint_services.endpoint_update(endpoint=endpoint, **fields)
    except InvalidInput as error:
        field = error.field if error.field in form.fields else None
        form.add_error(field, error.detail)
        return None


@require_http_methods(["GET", "POST"])
@portal_page
def endpoint_new(request: HttpRequest) -> HttpResponse:
    if _scope(request).read_only:
        return refuse(request, "This portal session is read only.")
    form = EndpointForm(request.POST or None, event_types=_event_types(request))
    if request.method == "POST" and form.is_valid():
        created = _save(request, form, None)
        if created is not None:
            return _done("portal:endpoint", "created", pk=created.pk)
    return _page(request, "portal/endpoint_form.html", {"form": form, "endpoint": None})


@require_http_methods(["GET", "POST"])
@portal_page
def endpoint_edit(request: HttpRequest, pk: str) -> HttpResponse:
    found = _endpoint(request, pk)
    if _scope(request).read_only:
        return refuse(request, "This portal session is read only.")
    initial = {
        "url": found.url,
        "description": found.description,
        "event_types": found.event_types,
        "rate_limit": found.rate_limit,
    }
    form = EndpointForm(request.POST or None, initial=initial, event_types=_event_types(request))
    if request.method == "POST" and form.is_valid() and _save(request, form, found) is not None:
        return _done("portal:endpoint", "saved", pk=found.pk)
    return _page(request, "portal/endpoint_form.html", {"form": form, "endpoint": found})


@require_http_methods(["GET", "POST"])
@portal_page
def endpoint_transport(request: HttpRequest, pk: str) -> HttpResponse:
    """Signing, OAuth2 auth and the client certificate (write-only values never shown)."""
    found = _endpoint(request, pk)
    if _scope(request).read_only:
        return refuse(request, "This portal session is read only.")
    if request.method == "POST" and "remove_certificate" in request.POST:
        endpoint_services.endpoint_update(endpoint=found, tls_client_certificate=None)
        return _done("portal:endpoint", "certificate-removed", pk=found.pk)
    form = TransportForm(
        request.POST or None, request.FILES or None, initial=transport_initial(found)
    )
    if request.method == "POST" and form.is_valid() and transport_save(form=form, endpoint=found):
        return _done("portal:endpoint", "saved", pk=found.pk)
    context = {"form": form, "endpoint": found, "auth_fields": AUTH_FIELDS}
    return _page(request, "portal/endpoint_transport.html", context)


@require_GET
@portal_page
def endpoint(request: HttpRequest, pk: str) -> HttpResponse:
    return _endpoint_page(request, pk)


def _endpoint_page(request: HttpRequest, pk: str, *, secret: str = "") -> HttpResponse:
    types = [*_event_types(request), endpoint_services.TEST_EVENT_TYPE]
    filters = DeliveryFilter(request.GET or None, event_types=types)
    chosen = filters.cleaned_data if filters.is_bound and filters.is_valid() else {}
    query = {
        "scope": _scope(request),
        "status": chosen.get("status", ""),
        "event_type": chosen.get("event_type", ""),
    }
    try:
        detail = selectors.endpoint_detail(
            endpoint_id=pk, cursor=request.GET.get("after", ""), **query
        )
    except BadCursor:
        detail = selectors.endpoint_detail(endpoint_id=pk, **query)
    if detail is None:
        raise Http404("No such endpoint.")
    kept = request.GET.copy()
    for name in ("after", "notice"):
        kept.pop(name, None)
    context = {
        "detail": detail,
        "filters": filters,
        "filter_query": kept.urlencode(),
        **selectors.endpoint_stats_shown(
            endpoint=detail.endpoint, period=request.GET.get("period")
        ),
        "stats_url": reverse("portal:endpoint", args=[detail.endpoint.pk]),
    }
    return _page(request, "portal/endpoint.html", {**context, "secret": secret})


@require_POST
@portal_page
def endpoint_action(request: HttpRequest, pk: str) -> HttpResponse:
    found = _endpoint(request, pk)
    action = request.POST.get("action", "")
    back = reverse("portal:endpoint", kwargs={"pk": pk})
    try:
        if action in ("activate", "deactivate"):
            wanted = action == "activate"
            if found.is_active != wanted:
                endpoint_services.endpoint_update(endpoint=found, is_active=wanted)
            return _done("portal:endpoint", f"{action}d", pk=pk)
        if action == "test":
            endpoint_send_test(endpoint=found)
            return _done("portal:endpoint", "tested", pk=pk)
        if action == "delete":
            endpoint_services.endpoint_delete(endpoint=found)
            return _done("portal:endpoints", "deleted")
        if action == "reveal":
            # Shown in this answer only (no redirect, nothing stored, no-store).
            return _endpoint_page(
                request, pk, secret=endpoint_services.endpoint_secret(endpoint=found)
            )
        if action == "rotate":
            rotated = endpoint_services.endpoint_rotate_secret(endpoint=found)
            return _endpoint_page(
                request, pk, secret=endpoint_services.endpoint_secret(endpoint=rotated)
            )
    except HomingError as error:
        return _failed(request, error, back)
    raise Http404("Unknown action.")


# --- deliveries and dead letters ---------------------------------------------------------


@require_GET
@portal_page
def delivery(request: HttpRequest, pk: str) -> HttpResponse:
    detail = selectors.delivery_detail(delivery_id=pk, scope=_scope(request))
    if detail is None:
        raise Http404("No such delivery.")
    return _page(request, "portal/delivery.html", {"detail": detail})


@require_POST
@portal_page
def delivery_retry(request: HttpRequest, pk: str) -> HttpResponse:
    found = (
        _scope(request).narrow(Delivery.objects.select_related("endpoint")).filter(pk=pk).first()
    )
    if found is None:
        raise Http404("No such delivery.")
    try:
        retries.delivery_retry(delivery=found)
    except HomingError as error:
        return _failed(request, error, reverse("portal:delivery", kwargs={"pk": pk}))
    return _done("portal:delivery", "retried", pk=pk)


@require_GET
@portal_page
def dead_letters(request: HttpRequest, pk: str) -> HttpResponse:
    found = _endpoint(request, pk)
    criteria = _scope(request).criteria(endpoint=found.pk)
    try:
        page = selectors.dead_letter_page(criteria=criteria, cursor=request.GET.get("after", ""))
    except BadCursor:
        page = selectors.dead_letter_page(criteria=criteria)
    return _page(
        request,
        "portal/dead_letters.html",
        {"endpoint": found, "page": page, "recover_form": RecoverForm()},
    )


@require_POST
@portal_page
def dead_letter_replay_view(request: HttpRequest, pk: str) -> HttpResponse:
    letter = (
        _scope(request)
        .narrow(dead_letters_in_queue().select_related("endpoint"))
        .filter(pk=pk)
        .first()
    )
    if letter is None:
        raise Http404("No such dead letter.")
    back = reverse("portal:dead-letters", kwargs={"pk": letter.endpoint_id})
    try:
        dead_letter_replay(dead_letter=letter)
    except HomingError as error:
        return _failed(request, error, back)
    return _done("portal:dead-letters", "replayed", pk=letter.endpoint_id)


@require_POST
@portal_page
def endpoint_recover_view(request: HttpRequest, pk: str) -> HttpResponse:
    found = _endpoint(request, pk)
    form = RecoverForm(request.POST)
    back = reverse("portal:dead-letters", kwargs={"pk": pk})
    if not form.is_valid():
        return _failed(request, InvalidInput("since", "Give a date and time."), back)
    try:
        endpoint_recover(
            endpoint=found,
            criteria=_scope(request).criteria(),
            since=form.cleaned_data["since"],
            requested_by=f"portal:{_scope(request).owner}",
        )
    except HomingError as error:
        return _failed(request, error, back)
    return _done("portal:dead-letters", "recovering", pk=pk)
