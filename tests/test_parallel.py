"""Parallel test runs (make test): each xdist worker has Redis and databases of its own."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from tests.parallel import worker_database_name, worker_redis_url


def test_outside_xdist_everything_keeps_its_name(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert worker_redis_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert worker_database_name("homing_producer") == "homing_producer"


def test_worker_gw_n_gets_redis_database_n_plus_one_and_suffixed_names(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    assert worker_redis_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/3"
    assert worker_redis_url("redis://127.0.0.1:6379/3") == "redis://127.0.0.1:6379/3"
    assert worker_database_name("homing_producer") == "homing_producer_gw2"


def test_more_workers_than_redis_databases_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw15")
    with pytest.raises(RuntimeError, match="gw15 has no Redis database of its own"):
        worker_redis_url("redis://127.0.0.1:6379/0")


def test_the_settings_and_the_processes_a_test_starts_use_this_workers_redis_database():
    # The environment is what processes a test starts inherit (tests/processes.py).
    assert os.environ["REDIS_URL"] == settings.REDIS_URL
    assert settings.CELERY_BROKER_URL == settings.REDIS_URL
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    expected = int(worker.removeprefix("gw")) + 1 if worker else 0
    assert settings.REDIS_URL.endswith(f"/{expected}")
