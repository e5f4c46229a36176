"""LOG_FORMAT=json lines and the X-Request-ID every API answer carries."""

from __future__ import annotations

import io
import json
import logging

import pytest
from pythonjsonlogger.json import JsonFormatter

from config.logs import JSON_FORMAT, RequestIdFilter, request_id
from deliveries.log_context import delivery_log_context


@pytest.fixture
def json_log():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(**JSON_FORMAT))
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("homing.test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield logger, stream
    logger.removeHandler(handler)


def lines(stream):
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_json_line_has_time_level_logger_message(json_log):
    logger, stream = json_log
    logger.warning("disk %s", "full")
    [line] = lines(stream)
    assert line["level"] == "WARNING" and line["logger"] == "homing.test"
    assert line["message"] == "disk full" and line["time"].endswith("+00:00")
    assert "request_id" not in line


def test_a_line_about_a_delivery_names_its_ids(json_log):
    logger, stream = json_log

    class Delivery:
        id, tenant_id, event_id, endpoint_id = "dlv_1", "ten_1", "evt_1", "ep_1"

    logger.info("sent", extra=delivery_log_context(Delivery()))
    [line] = lines(stream)
    assert {k: line[k] for k in ("delivery_id", "tenant_id", "event_id", "endpoint_id")} == {
        "delivery_id": "dlv_1",
        "tenant_id": "ten_1",
        "event_id": "evt_1",
        "endpoint_id": "ep_1",
    }


def test_a_line_logged_during_a_request_carries_its_id(json_log):
    logger, stream = json_log
    token = request_id.set("req_abc")
    try:
        logger.info("inside")
    finally:
        request_id.reset(token)
    logger.info("outside")
    inside, outside = lines(stream)
    assert inside["request_id"] == "req_abc" and "request_id" not in outside


def test_it_echoes_the_callers_request_id(alice):
    response = alice.client.get("/api/v1/endpoints", HTTP_X_REQUEST_ID="trace-7 from:billing")
    assert response["X-Request-ID"] == "trace-7 from:billing"


@pytest.mark.parametrize("offered", [None, "x" * 201, "bad\tid", "", "   "])
def test_it_generates_a_request_id_when_none_fits(alice, offered):
    headers = {} if offered is None else {"HTTP_X_REQUEST_ID": offered}
    first = alice.client.get("/api/v1/endpoints", **headers)["X-Request-ID"]
    second = alice.client.get("/api/v1/endpoints", **headers)["X-Request-ID"]
    assert first.startswith("req_") and first != second


def test_errors_and_unknown_routes_carry_a_request_id(client):
    assert client.get("/api/v1/endpoints")["X-Request-ID"].startswith("req_")  # 401
    assert client.get("/api/v1/nothing-here")["X-Request-ID"].startswith("req_")  # 404


def test_django_request_warnings_carry_the_request_id(client, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/api/v1/nothing-here", HTTP_X_REQUEST_ID="trace-404")
    assert response.status_code == 404
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert RequestIdFilter().filter(record) and record.request_id == "trace-404"
