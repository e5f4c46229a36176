"""The web process serves the intake POSTs through a shorter middleware chain
(config/intake_handler.py); a client must not be able to tell the two chains apart."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from config.intake_handler import CONSOLE_ONLY, Application

SINGLE = {"type": "order.paid", "data": {"n": 1}}
BATCH = {"events": [SINGLE, SINGLE]}


def _call(app: Any, method: str, path: str, body: bytes = b"", **headers: str) -> tuple:
    """One request through a WSGI app, as gunicorn makes it: (status, headers, body)."""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_X_REQUEST_ID": "req_same_for_both",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
        **{f"HTTP_{name.upper()}": value for name, value in headers.items()},
    }
    answer: dict[str, Any] = {}

    def start_response(status: str, response_headers: list, exc_info: Any = None) -> None:
        answer["status"], answer["headers"] = status, response_headers

    result = app(environ, start_response)
    content = b"".join(result)
    result.close()
    return answer["status"], answer["headers"], content


@pytest.fixture(scope="module")
def application() -> Application:
    return Application()


def _requests(key: str, idempotency_key: str) -> list[tuple[str, bytes, dict[str, str]]]:
    auth = {"AUTHORIZATION": f"Bearer {key}"}
    return [
        ("/api/v1/events", json.dumps(SINGLE).encode(), auth),
        ("/api/v1/events/batch", json.dumps(BATCH).encode(), auth),
        ("/api/v1/events", json.dumps(SINGLE).encode(), {}),  # 401
        ("/api/v1/events", b"{not json", auth),  # 400
        ("/api/v1/events", json.dumps({"data": {}}).encode(), auth),  # 400, no type
        ("/api/v1/events", json.dumps(SINGLE).encode(), {"AUTHORIZATION": "Bearer hoc_x"}),
        (
            "/api/v1/events",
            json.dumps(SINGLE).encode(),
            {**auth, "IDEMPOTENCY_KEY": idempotency_key},
        ),
        (
            "/api/v1/events",
            json.dumps(SINGLE).encode(),
            {**auth, "IDEMPOTENCY_KEY": idempotency_key},
        ),
    ]


@pytest.mark.django_db(transaction=True)
def test_the_short_chain_answers_what_the_full_one_answers(alice, application):
    """Status, every header and the body's shape; only the new events' ids and times differ."""
    short = [_call(application.intake, "POST", p, b, **h) for p, b, h in _requests(alice.key, "s")]
    full = [_call(application.full, "POST", p, b, **h) for p, b, h in _requests(alice.key, "f")]
    statuses = [status for status, _, _ in short]
    assert statuses == [status for status, _, _ in full]
    assert statuses[:4] == ["202 Accepted", "202 Accepted", "401 Unauthorized", "400 Bad Request"]
    for (_, short_headers, short_body), (_, full_headers, full_body) in zip(short, full):
        assert _without_length(short_headers) == _without_length(full_headers)
        assert dict(short_headers)["Content-Length"] == str(len(short_body))
        assert _shape(short_body) == _shape(full_body)
    assert dict(short[7][1])["Idempotent-Replayed"] == "true"  # the key's second request


def _without_length(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted((name, value) for name, value in headers if name != "Content-Length")


def _shape(body: bytes) -> Any:
    """The JSON with the values that are new for each event (ids, times) blanked."""

    def blank(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: blank(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [blank(v) for v in value]
        return "*" if key in {"id", "created_at"} else value

    return blank(json.loads(body))


def test_the_short_chain_leaves_out_middleware_that_exist(application, settings):
    # A renamed entry would silently leave the chain as long as the full one; and the
    # setting is the full list again once the short chain is built.
    assert set(settings.MIDDLEWARE) >= CONSOLE_ONLY


@pytest.mark.django_db
def test_only_the_intake_posts_take_the_short_chain(alice, application, monkeypatch):
    taken: list[str] = []

    def recorded(name: str) -> Any:
        handler = getattr(application, name)

        def call(environ: dict[str, Any], start_response: Any) -> Any:
            taken.append(name)
            return handler(environ, start_response)

        return call

    for name in ("intake", "full"):
        monkeypatch.setattr(application, name, recorded(name))
    auth = {"AUTHORIZATION": f"Bearer {alice.key}"}
    body = json.dumps(SINGLE).encode()
    _call(application, "POST", "/api/v1/events", body, **auth)
    _call(application, "POST", "/api/v1/events/batch", json.dumps(BATCH).encode(), **auth)
    _call(application, "GET", "/api/v1/events", b"", **auth)
    _call(application, "POST", "/api/v1/endpoints", b"{}", **auth)
    _call(application, "GET", "/healthz")
    assert taken == ["intake", "intake", "full", "full", "full"]
