from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import Client, RequestFactory
from django.urls import path
from homing_receiver import Deduplicator, MemoryStore, SequenceState, SequenceTracker
from homing_receiver.django import DjangoStore, webhook_view
from homing_receiver.django.models import ProcessedWebhook, SeenSequence, SequenceMark

SignHeaders = Callable[..., dict[str, str]]  # the sign_headers fixture

BODY = b'{"type": "order.shipped", "data": {"order": "ord_7"}}'


class Recorder:
    """A webhook view that remembers its calls and can be told to fail."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.fail_with: Exception | None = None

    def __call__(self, request: HttpRequest, event: dict[str, Any], **kwargs: Any) -> HttpResponse:
        self.events.append(event | kwargs)
        if self.fail_with is not None:
            raise self.fail_with
        return JsonResponse({"handled": event["data"]["order"]}, status=202)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def view(secret: str, store: MemoryStore, recorder: Recorder) -> Callable[..., HttpResponse]:
    return webhook_view(secret=secret, deduplicator=Deduplicator(store))(recorder)


def post(
    view: Callable[..., HttpResponse], headers: dict[str, str], body: bytes = BODY, **kwargs: Any
) -> HttpResponse:
    request = RequestFactory().post(
        "/hooks/orders/", body, content_type="application/json", headers=headers
    )
    return view(request, **kwargs)


def message(response: HttpResponse) -> str:
    return str(json.loads(response.content)["message"])


def test_it_passes_the_verified_event_to_the_view(
    view: Callable[..., HttpResponse], recorder: Recorder, sign_headers: SignHeaders
) -> None:
    response = post(view, sign_headers(BODY), shop="alice")

    assert response.status_code == 202
    assert json.loads(response.content) == {"handled": "ord_7"}
    assert recorder.events == [
        {"type": "order.shipped", "data": {"order": "ord_7"}, "shop": "alice"}
    ]


def test_it_answers_400_to_a_bad_signature_without_calling_the_view(
    view: Callable[..., HttpResponse], recorder: Recorder, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)

    response = post(view, headers, body=BODY.replace(b"ord_7", b"ord_8"))

    assert response.status_code == 400
    assert "No matching signature" in message(response)
    assert recorder.events == []


def test_it_answers_400_naming_a_missing_header(
    view: Callable[..., HttpResponse], sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)
    del headers["webhook-timestamp"]

    response = post(view, headers)

    assert response.status_code == 400
    assert message(response) == "Missing required header(s): webhook-timestamp"


def test_it_answers_a_duplicate_with_200_without_calling_the_view(
    view: Callable[..., HttpResponse],
    recorder: Recorder,
    sign_headers: SignHeaders,
    caplog: pytest.LogCaptureFixture,
) -> None:
    headers = sign_headers(BODY, msg_id="msg_bob_42")
    assert post(view, headers).status_code == 202

    with caplog.at_level("INFO", logger="homing_receiver"):
        response = post(view, headers)

    assert response.status_code == 200
    assert len(recorder.events) == 1
    assert any(
        "duplicate" in r.getMessage() and "msg_bob_42" in r.getMessage() for r in caplog.records
    )


def test_it_answers_409_while_another_worker_handles_the_event(
    view: Callable[..., HttpResponse],
    store: MemoryStore,
    recorder: Recorder,
    sign_headers: SignHeaders,
) -> None:
    headers = sign_headers(BODY)
    store.claim(headers["webhook-id"], "another-worker", 60)

    response = post(view, headers)

    assert response.status_code == 409
    assert "being processed by another worker" in message(response)
    assert recorder.events == []


def test_it_answers_500_when_the_view_raises_and_runs_it_again_on_retry(
    view: Callable[..., HttpResponse], recorder: Recorder, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)
    recorder.fail_with = ConnectionError("warehouse API down")

    assert post(view, headers).status_code == 500

    recorder.fail_with = None
    assert post(view, headers).status_code == 202
    assert len(recorder.events) == 2
    assert post(view, headers).status_code == 200


def test_it_answers_405_to_anything_but_post(view: Callable[..., HttpResponse]) -> None:
    response = view(RequestFactory().get("/hooks/orders/"))

    assert response.status_code == 405


def test_without_a_deduplicator_every_delivery_reaches_the_view(
    secret: str, recorder: Recorder, sign_headers: SignHeaders
) -> None:
    view = webhook_view(secret=secret)(recorder)
    headers = sign_headers(BODY)

    assert [post(view, headers).status_code for _ in range(2)] == [202, 202]
    assert len(recorder.events) == 2


def test_it_keeps_the_views_name_and_is_csrf_exempt(secret: str) -> None:
    @webhook_view(secret=secret)
    def order_shipped(request: HttpRequest, event: dict[str, Any]) -> HttpResponse:
        return HttpResponse()

    assert order_shipped.__name__ == "order_shipped"
    assert getattr(order_shipped, "csrf_exempt", False) is True


# Routes for the end-to-end test below; it points ROOT_URLCONF at this module.
e2e_recorder = Recorder()
urlpatterns: list[Any] = []


@pytest.mark.django_db(transaction=True)
def test_it_works_end_to_end_through_csrf_middleware_with_the_django_store(
    secret: str, sign_headers: SignHeaders, settings: Any
) -> None:
    # The view is built per test so that the secret fixture matches.
    e2e_recorder.events.clear()
    e2e_recorder.fail_with = RuntimeError("first try fails")
    hook = webhook_view(secret=secret, deduplicator=Deduplicator(DjangoStore()))(e2e_recorder)
    urlpatterns[:] = [path("hooks/orders/", hook)]
    settings.ROOT_URLCONF = __name__
    csrf = "django.middleware.csrf.CsrfViewMiddleware"
    if csrf not in settings.MIDDLEWARE:
        settings.MIDDLEWARE = [*settings.MIDDLEWARE, csrf]
    client = Client(enforce_csrf_checks=True)
    headers = sign_headers(BODY)

    def deliver() -> int:
        return client.post(
            "/hooks/orders/", BODY, content_type="application/json", headers=headers
        ).status_code

    assert deliver() == 500
    e2e_recorder.fail_with = None
    assert deliver() == 202
    assert deliver() == 200
    assert len(e2e_recorder.events) == 2


@pytest.mark.django_db(transaction=True)
def test_under_atomic_requests_a_failed_views_writes_are_rolled_back(
    secret: str, sign_headers: SignHeaders, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Django reads ATOMIC_REQUESTS from the connection, not from settings.DATABASES.
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    attempts: list[int] = []

    def record_then_maybe_fail(request: HttpRequest, event: dict[str, Any]) -> HttpResponse:
        attempts.append(1)
        # Any write the view makes; a row of our own model keeps the test self-contained.
        ProcessedWebhook.objects.create(
            key=f"side-effect-{len(attempts)}",
            state="done",
            owner="view",
            expires_at=datetime(2100, 1, 1, tzinfo=UTC),
        )
        if len(attempts) == 1:
            raise RuntimeError("first try fails after writing")
        return HttpResponse(status=204)

    hook = webhook_view(secret=secret, deduplicator=Deduplicator(DjangoStore()))(
        record_then_maybe_fail
    )
    urlpatterns[:] = [path("hooks/orders/", hook)]
    settings.ROOT_URLCONF = __name__
    headers = sign_headers(BODY)

    def deliver() -> int:
        return (
            Client()
            .post("/hooks/orders/", BODY, content_type="application/json", headers=headers)
            .status_code
        )

    assert deliver() == 500
    assert not ProcessedWebhook.objects.filter(key__startswith="side-effect").exists()

    assert deliver() == 204
    assert deliver() == 200
    assert list(
        ProcessedWebhook.objects.filter(key__startswith="side-effect").values_list("key", flat=True)
    ) == ["side-effect-2"]


@pytest.fixture
def tracker(store: MemoryStore) -> SequenceTracker:
    return SequenceTracker(store, "ep_alice")


@pytest.fixture
def tracked_view(
    secret: str, store: MemoryStore, recorder: Recorder, tracker: SequenceTracker
) -> Callable[..., HttpResponse]:
    return webhook_view(secret=secret, deduplicator=Deduplicator(store), tracker=tracker)(recorder)


def test_a_tracker_records_the_sequence_of_each_handled_webhook(
    tracked_view: Callable[..., HttpResponse],
    tracker: SequenceTracker,
    sign_headers: SignHeaders,
) -> None:
    for sequence in ("1", "2", "4"):
        headers = sign_headers(BODY) | {"homing-sequence": sequence}
        assert post(tracked_view, headers).status_code == 202

    assert tracker.last_contiguous() == 2
    assert tracker.gaps() == [(3, 3)]


def test_a_duplicate_answered_200_records_its_sequence_too(
    tracked_view: Callable[..., HttpResponse],
    store: MemoryStore,
    tracker: SequenceTracker,
    recorder: Recorder,
    sign_headers: SignHeaders,
) -> None:
    # Handled once already (say by catch_up) without its sequence being recorded.
    headers = sign_headers(BODY, msg_id="msg_7") | {"homing-sequence": "1"}
    Deduplicator(store).process("msg_7", lambda: None)

    assert post(tracked_view, headers).status_code == 200

    assert recorder.events == []
    assert tracker.last_contiguous() == 1


def test_a_failed_or_refused_webhook_records_no_sequence(
    secret: str,
    tracked_view: Callable[..., HttpResponse],
    recorder: Recorder,
    tracker: SequenceTracker,
    sign_headers: SignHeaders,
) -> None:
    recorder.fail_with = RuntimeError("db down")
    assert post(tracked_view, sign_headers(BODY) | {"homing-sequence": "1"}).status_code == 500

    def not_now(request: HttpRequest, event: dict[str, Any]) -> HttpResponse:
        return JsonResponse({"message": "unknown order"}, status=422)

    refusing = webhook_view(secret=secret, tracker=tracker)(not_now)
    assert post(refusing, sign_headers(BODY) | {"homing-sequence": "2"}).status_code == 422

    forged = sign_headers(BODY) | {"homing-sequence": "3"}
    assert post(tracked_view, forged, body=BODY + b" ").status_code == 400

    assert tracker.state().seen_above == ()
    assert tracker.last_contiguous() == 0


@pytest.mark.parametrize("value", ["abc", "-1", "0", "99999999999999999999"])
def test_a_malformed_sequence_is_ignored_with_a_warning(
    tracked_view: Callable[..., HttpResponse],
    tracker: SequenceTracker,
    sign_headers: SignHeaders,
    caplog: pytest.LogCaptureFixture,
    value: str,
) -> None:
    with caplog.at_level("WARNING", logger="homing_receiver"):
        response = post(tracked_view, sign_headers(BODY) | {"homing-sequence": value})

    assert response.status_code == 202
    assert "malformed homing-sequence" in caplog.text
    assert tracker.state() == SequenceState(0, ())


def test_a_webhook_without_a_sequence_is_handled_as_before(
    tracked_view: Callable[..., HttpResponse], tracker: SequenceTracker, sign_headers: SignHeaders
) -> None:
    assert post(tracked_view, sign_headers(BODY)).status_code == 202
    assert tracker.last_contiguous() == 0


def test_a_store_failure_while_recording_keeps_the_views_answer(
    secret: str,
    recorder: Recorder,
    sign_headers: SignHeaders,
    caplog: pytest.LogCaptureFixture,
) -> None:
    class DownStore(MemoryStore):
        def sequence_see(self, endpoint_id: str, sequence: int) -> None:
            raise ConnectionError("redis down")

    view = webhook_view(secret=secret, tracker=SequenceTracker(DownStore(), "ep_1"))(recorder)

    response = post(view, sign_headers(BODY) | {"homing-sequence": "5"})

    assert response.status_code == 202
    assert "could not record sequence 5" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_the_django_store_records_sequences_through_the_view(
    secret: str, recorder: Recorder, sign_headers: SignHeaders
) -> None:
    tracker = SequenceTracker(DjangoStore(), "ep_alice")
    view = webhook_view(secret=secret, deduplicator=Deduplicator(DjangoStore()), tracker=tracker)(
        recorder
    )

    for sequence in ("2", "1", "3"):
        assert post(view, sign_headers(BODY) | {"homing-sequence": sequence}).status_code == 202

    assert SequenceMark.objects.get(endpoint_id="ep_alice").last_contiguous == 3
    assert not SeenSequence.objects.exists()
