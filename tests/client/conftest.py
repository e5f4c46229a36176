"""Client fixtures. The Homing stack (workers, receivers) comes from tests/e2e."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from tests.client.stack import (
    PRODUCER_SETTINGS,
    Producer,
    RecordingProxy,
    Server,
    create_database,
)
from tests.e2e.conftest import homing, pytest_runtest_makereport, receiver_factory  # noqa: F401
from tests.parallel import worker_database_name
from tests.processes import ROOT, process_env


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes seconds (builds a venv, spawns processes)")


@pytest.fixture(scope="session")
def producer_dsn(django_db_setup: None) -> str:
    """The producer app's own database, next to Homing's on the test server, migrated."""
    db = settings.DATABASES["default"]
    server = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}"
    name = worker_database_name("homing_producer")  # one per xdist worker
    create_database(f"{server}/postgres", name)
    dsn = f"{server}/{name}"
    env = process_env(DJANGO_SETTINGS_MODULE=PRODUCER_SETTINGS, PRODUCER_DATABASE_URL=dsn)
    migrate = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id serial PRIMARY KEY, amount int NOT NULL)")
    return dsn


@pytest.fixture(scope="session")
def producer_web(producer_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(
        "producer_web",
        "tests.client.producer_app.wsgi",
        tmp_path_factory.mktemp("producer"),
        DJANGO_SETTINGS_MODULE=PRODUCER_SETTINGS,
        PRODUCER_DATABASE_URL=producer_dsn,
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _homing_api_server(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    server = Server("homing_api", "config.wsgi", tmp_path_factory.mktemp("homing_api"))
    yield server
    server.stop()


@pytest.fixture
def homing_api(_homing_api_server: Server, transactional_db: None) -> Server:
    """Homing's real API over HTTP, on the test database (running at the start of a test)."""
    if _homing_api_server.process is None:
        _homing_api_server.start()
    return _homing_api_server


@pytest.fixture
def proxy(homing_api: Server) -> Iterator[RecordingProxy]:
    recording = RecordingProxy(homing_api.url)
    yield recording
    recording.stop()


@pytest.fixture
def producer(
    producer_web: Server, producer_dsn: str, transactional_db: None, tmp_path: Path, request
) -> Iterator[Producer]:
    app = Producer(producer_dsn, producer_web, tmp_path)
    app.reset()
    yield app
    app.stop_relays()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for relay in app.relays:
            print(f"----- {relay.name} log -----\n{relay.log()[-5000:]}")
        print(f"----- producer_web log -----\n{producer_web.log()[-3000:]}")
