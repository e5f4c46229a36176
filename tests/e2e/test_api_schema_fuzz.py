"""Schemathesis, reading our own OpenAPI schema, against a real gunicorn process.

Every operation the schema lists is called with requests derived from the schema — the
edges of each stated limit and wrong types (coverage), random bodies and parameters
(fuzzing), and stateful sequences that follow the ids one answer gives to the next
operation (its links) — as a tenant with a real API key. The run must find nothing: no
5xx, no status code, header or body the schema does not declare, and no request that
breaks the schema accepted. Routes added later are covered without touching this file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deliveries.intake.creation import deliveries_create_for_event
from deliveries.models import Delivery
from tests.factories import dead_letter_of
from tests.processes import Web, process_env
from webhooks.models import Event
from webhooks.services.endpoints import endpoint_create
from webhooks.services.tenants import tenant_create

pytestmark = pytest.mark.e2e

# Examples per operation and phase: enough to reach every stated limit's edges and a few
# dozen random requests per route, while the run takes about half a minute on 2 cores.
MAX_EXAMPLES = "25"
SEED = "21"  # the same requests every run; change it to explore, then fix what it finds
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "missing_required_header",
        "unsupported_method",
        "use_after_free",
        "ensure_resource_availability",
        "ignored_auth",
    ]
)


@pytest.fixture
def web(transactional_db, tmp_path: Path):
    server = Web(tmp_path, "web", threads=4)
    yield server
    server.process.stop()


def a_tenant_with_dead_letters() -> str:
    """A real key whose tenant has an endpoint, events, deliveries and dead letters, so
    that list answers hand the stateful phase real ids (no worker runs: nothing is sent)."""
    tenant, key = tenant_create(name="Fuzzed Inc")
    endpoint = endpoint_create(tenant=tenant, url="http://127.0.0.1:9/hook")
    for number in range(3):
        event = Event.objects.create(tenant=tenant, type="order.paid", data={"n": number})
        deliveries_create_for_event(event=event, endpoints=[endpoint])
    for delivery in Delivery.objects.filter(tenant=tenant)[:2]:
        dead_letter_of(delivery, "HTTP 404 (not retryable)")
    return key


# A request that breaks the schema must be refused: by Homing (4xx), or by the HTTP
# server before it (414, a URL over gunicorn's request-line limit; the schema says so).
CONFIG = """
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "414", "415",
    "422", "428", "429"]
"""


def test_schemathesis_finds_nothing_wrong_with_the_api(web, tmp_path: Path):
    key = a_tenant_with_dead_letters()
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(tmp_path / "schemathesis.toml"),
        "run",
        f"http://127.0.0.1:{web.port}/api/v1/schema/",
        "--header",
        f"Authorization: Bearer {key}",
        "--checks",
        CHECKS,
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        MAX_EXAMPLES,
        "--seed",
        SEED,
        # One worker: Python 3.11's ast.parse, which Hypothesis calls to describe its
        # filters, is not thread-safe (a SystemError in the fuzzer, not in Homing).
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "10",
        "--no-color",
    ]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        # About 40 s alone; a CI box running four other test processes took over 110 s.
        # The bound catches a hang, inside pytest's own 300 s.
        timeout=270,
        cwd=tmp_path,  # its reports stay out of the checkout
        env=process_env(),
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-3000:]
    assert "Stateful" in result.stdout and "passed" in result.stdout
