"""The console's pages: thin — parse, call one selector or service, render."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console import selectors
from console.access import (
    CHANGE_ENDPOINT,
    REPLAY_OR_DISCARD,
    RETRY_DELIVERY,
    permission_required,
    staff_required,
)
from console.event_types import event_types_sent
from console.filter_editor import filter_editor_opened, filter_editor_saved, filter_editor_tried
from console.forms import DeadLetterFilter, ReplayAllForm, SelectionForm
from console.paging import BadCursor
from console.transport_forms import AUTH_FIELDS, TransportForm, transport_initial, transport_save
from core.exceptions import HomingError
from deliveries.intake import retries
from deliveries.intake.ingest import endpoint_send_test
from deliveries.models import Delivery
from dlq.models import DeadLetter
from dlq.selectors import dead_letters_in_queue
from dlq.services.discard import dead_letter_discard, dead_letters_discard
from dlq.services.replay import dead_letter_replay, dead_letters_replay
from dlq.services.replay_jobs import replay_job_create, replay_jobs_resume
from webhooks.models import Endpoint
from webhooks.scope import Scope
from webhooks.services import endpoints as endpoint_services


def _back(request: HttpRequest, default: str) -> HttpResponse:
    """Redirect to the page the form was posted from (the same site only)."""
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        target = default
    return redirect(target)


@require_GET
@staff_required
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "console/dashboard.html", {"board": selectors.dashboard_read()})


# --- dead letters ---------------------------------------------------------------------


@require_GET
@staff_required
def dead_letters(request: HttpRequest) -> HttpResponse:
    tenants = selectors.tenant_choices()
    form = DeadLetterFilter(request.GET or None, tenants=tenants)
    criteria = form.criteria() if form.is_bound and form.is_valid() else {}
    # The job before the rows: a job read as running makes the page's script redraw the
    # rows once it finishes, and one read as finished had its replays committed before
    # the rows are read. Read after the rows, a job finishing in between showed finished
    # over rows still "waiting", and the script (seeing it finished) never redrew them.
    job = selectors.replay_job_read(job_id=request.GET.get("job", ""))
    try:
        page = selectors.dead_letter_page(criteria=criteria, cursor=request.GET.get("after", ""))
    except BadCursor as error:
        messages.error(request, str(error))
        page = selectors.dead_letter_page(criteria=criteria)
    query = request.GET.copy()
    query.pop("after", None)
    query.pop("job", None)
    return render(
        request,
        "console/dead_letters.html",
        {
            "form": form,
            "page": page,
            "filter_query": query.urlencode(),
            "filtered": bool(criteria),
            "job": job,
        },
    )


def _letter(pk: str) -> DeadLetter:
    letter = dead_letters_in_queue().select_related("endpoint").filter(pk=pk).first()
    if letter is None:
        raise Http404("No such dead letter.")
    return letter


@require_POST
@staff_required
@permission_required(REPLAY_OR_DISCARD)
def dead_letter_replay_view(request: HttpRequest, pk: str) -> HttpResponse:
    letter = _letter(pk)
    try:
        dead_letter_replay(dead_letter=letter)
        messages.success(request, f"Replayed {letter.id}: its delivery is pending again.")
    except HomingError as error:
        messages.error(request, error.message)
    return _back(request, reverse("console:dead-letters"))


@require_POST
@staff_required
@permission_required(REPLAY_OR_DISCARD)
def dead_letter_discard_view(request: HttpRequest, pk: str) -> HttpResponse:
    letter = _letter(pk)
    try:
        dead_letter_discard(dead_letter=letter)
        messages.success(request, f"Discarded {letter.id}; its delivery stays dead.")
    except HomingError as error:
        messages.error(request, error.message)
    return _back(request, reverse("console:dead-letters"))


@require_POST
@staff_required
@permission_required(REPLAY_OR_DISCARD)
def dead_letters_selected(request: HttpRequest) -> HttpResponse:
    form = SelectionForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(map(str, form.non_field_errors())) or "Invalid selection.")
        return _back(request, reverse("console:dead-letters"))
    ids = form.cleaned_data["ids"]
    if form.cleaned_data["action"] == "replay":
        chosen = list(dead_letters_in_queue().filter(pk__in=ids).select_related("endpoint"))
        done = dead_letters_replay(dead_letters=chosen)
        verb = "Replayed"
    else:
        done = dead_letters_discard(criteria={"ids": ids})
        verb = "Discarded"
    skipped = len(ids) - done
    level = messages.SUCCESS if not skipped else messages.WARNING
    note = (
        f" {skipped} skipped: already replayed or discarded, delivery no longer dead, "
        "endpoint inactive, or unknown."
        if skipped
        else ""
    )
    messages.add_message(request, level, f"{verb} {done} of {len(ids)}.{note}")
    return _back(request, reverse("console:dead-letters"))


@require_POST
@staff_required
@permission_required(REPLAY_OR_DISCARD)
def dead_letters_replay_all(request: HttpRequest) -> HttpResponse:
    form = ReplayAllForm(request.POST, tenants=selectors.tenant_choices())
    back = reverse("console:dead-letters")
    if not form.is_valid():
        messages.error(request, "That form was not valid; nothing was replayed.")
        return _back(request, back)
    criteria = form.criteria()
    # The same (possibly capped) count the page showed: a stale confirmation differs.
    now_waiting = selectors.dead_letters_waiting_count(criteria=criteria)
    if now_waiting != form.cleaned_data["expected"]:
        # Stale confirmation: the operator agreed to another number. Ask again.
        messages.error(
            request,
            f"The queue changed: {now_waiting} dead letters match now, not "
            f"{form.cleaned_data['expected']}. Nothing was replayed; check and confirm again.",
        )
        return _back(request, back)
    job = replay_job_create(criteria=criteria, requested_by=request.user.get_username())
    messages.success(request, f"Replaying {job.total} dead letters in the background.")
    target = request.POST.get("next", back)
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        target = back
    separator = "&" if "?" in target else "?"
    return redirect(f"{target}{separator}job={job.pk}")


@require_GET
@staff_required
def replay_job_status(request: HttpRequest, pk: str) -> HttpResponse:
    replay_jobs_resume()  # a poller is a cheap watchdog for jobs whose process died
    job = selectors.replay_job_read(job_id=pk)
    if job is None:
        raise Http404("No such replay job.")
    return JsonResponse(
        {
            "id": job.pk,
            "status": job.status,
            "total": job.total,
            "done": job.done,
            "replayed": job.replayed,
            "percent": job.percent,
        }
    )


# --- deliveries, endpoints, tenants -----------------------------------------------------


@require_GET
@staff_required
def delivery(request: HttpRequest, pk: str) -> HttpResponse:
    detail = selectors.delivery_detail(delivery_id=pk)
    if detail is None:
        raise Http404("No such delivery.")
    return render(request, "console/delivery.html", {"detail": detail})


@require_POST
@staff_required
@permission_required(RETRY_DELIVERY)
def delivery_retry(request: HttpRequest, pk: str) -> HttpResponse:
    found = Delivery.objects.select_related("endpoint").filter(pk=pk).first()
    if found is None:
        raise Http404("No such delivery.")
    try:
        retries.delivery_retry(delivery=found)
        messages.success(request, "Retry requested: one more attempt now.")
    except HomingError as error:
        messages.error(request, error.message)
    return redirect("console:delivery", pk=pk)


@require_GET
@staff_required
def endpoint(request: HttpRequest, pk: str) -> HttpResponse:
    try:
        detail = selectors.endpoint_detail(endpoint_id=pk, cursor=request.GET.get("after", ""))
    except BadCursor as error:
        messages.error(request, str(error))
        detail = selectors.endpoint_detail(endpoint_id=pk)
    if detail is None:
        raise Http404("No such endpoint.")
    # Secrets still in their rotation grace sign too: say how many besides the current one.
    older_signing = endpoint_services.endpoint_secrets_in_grace(endpoint=detail.endpoint)
    return render(
        request,
        "console/endpoint.html",
        {
            "detail": detail,
            "older_signing": older_signing,
            **selectors.endpoint_stats_shown(
                endpoint=detail.endpoint, period=request.GET.get("period")
            ),
            "stats_url": reverse("console:endpoint", args=[detail.endpoint.pk]),
        },
    )


@require_POST
@staff_required
@permission_required(CHANGE_ENDPOINT)
def endpoint_action(request: HttpRequest, pk: str) -> HttpResponse:
    found = Endpoint.objects.filter(pk=pk).first()
    if found is None:
        raise Http404("No such endpoint.")
    action = request.POST.get("action")
    if action in ("activate", "deactivate"):
        wanted = action == "activate"
        if found.is_active == wanted:  # a stale page: say so, change nothing
            messages.error(
                request, f"The endpoint is already {'active' if wanted else 'inactive'}."
            )
        else:
            endpoint_services.endpoint_update(endpoint=found, is_active=wanted)
            messages.success(request, f"Endpoint {'activated' if wanted else 'deactivated'}.")
    elif action == "rotate":
        rotated = endpoint_services.endpoint_rotate_secret(endpoint=found)
        grace_hours = settings.HOMING_SECRET_ROTATION_GRACE / 3600
        messages.success(
            request,
            f"New signing secret: {endpoint_services.endpoint_secret(endpoint=rotated)} — the "
            f"old one also signs for {grace_hours:g} h (HOMING_SECRET_ROTATION_GRACE).",
        )
    elif action == "test":
        try:
            endpoint_send_test(endpoint=found)
            messages.success(request, "Test event sent: see it under recent deliveries.")
        except HomingError as error:
            messages.error(request, error.message)
    else:
        messages.error(request, "Unknown action; nothing was changed.")
    return redirect("console:endpoint", pk=pk)


@require_http_methods(["GET", "POST"])
@staff_required
@permission_required(CHANGE_ENDPOINT)
def endpoint_transport(request: HttpRequest, pk: str) -> HttpResponse:
    """Signing, OAuth2 auth and the client certificate (write-only values never shown)."""
    found = Endpoint.objects.filter(pk=pk).first()
    if found is None:
        raise Http404("No such endpoint.")
    if request.method == "POST" and "remove_certificate" in request.POST:
        endpoint_services.endpoint_update(endpoint=found, tls_client_certificate=None)
        messages.success(request, "Client certificate removed.")
        return redirect("console:endpoint", pk=pk)
    form = TransportForm(
        request.POST or None, request.FILES or None, initial=transport_initial(found)
    )
    if request.method == "POST" and form.is_valid() and transport_save(form=form, endpoint=found):
        messages.success(request, "Signing, auth and certificate saved.")
        return redirect("console:endpoint", pk=pk)
    context = {"form": form, "endpoint": found, "auth_fields": AUTH_FIELDS}
    return render(request, "console/endpoint_transport.html", context)


# --- the filter editor (shared with the portal: console/filter_editor.py) ----------------


def _endpoint_of_tenant(pk: str) -> tuple[Endpoint, Scope]:
    """An endpoint and the scope whose events its filter is tried on: its whole tenant."""
    found = Endpoint.objects.select_related("tenant").filter(pk=pk).first()
    if found is None:
        raise Http404("No such endpoint.")
    return found, Scope(tenant=found.tenant)


@require_GET
@staff_required
def filter_editor(request: HttpRequest, pk: str) -> HttpResponse:
    found, scope = _endpoint_of_tenant(pk)
    types = event_types_sent(tenant_id=scope.tenant_id)
    editor = filter_editor_opened(scope=scope, endpoint=found, event_types=types)
    return render(request, "console/filter.html", editor.context, status=editor.status)


@require_POST
@staff_required  # trying changes nothing: every staff user may
def filter_editor_try(request: HttpRequest, pk: str) -> HttpResponse:
    found, scope = _endpoint_of_tenant(pk)
    types = event_types_sent(tenant_id=scope.tenant_id)
    editor = filter_editor_tried(scope=scope, endpoint=found, event_types=types, form=request.POST)
    return render(request, "console/filter.html", editor.context, status=editor.status)


@require_POST
@staff_required
@permission_required(CHANGE_ENDPOINT)
def filter_editor_save(request: HttpRequest, pk: str) -> HttpResponse:
    found, scope = _endpoint_of_tenant(pk)
    types = event_types_sent(tenant_id=scope.tenant_id)
    editor = filter_editor_saved(scope=scope, endpoint=found, event_types=types, form=request.POST)
    if editor is not None:
        return render(request, "console/filter.html", editor.context, status=editor.status)
    messages.success(request, "Filter saved.")
    return redirect("console:endpoint", pk=pk)


@require_GET
@staff_required
def tenants(request: HttpRequest) -> HttpResponse:
    try:
        rows, next_cursor = selectors.tenant_page(cursor=request.GET.get("after", ""))
    except BadCursor as error:
        messages.error(request, str(error))
        rows, next_cursor = selectors.tenant_page()
    return render(request, "console/tenants.html", {"rows": rows, "next_cursor": next_cursor})
