"""Claims hold across OS processes, not just threads: the Redis and PostgreSQL stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import homing_receiver
import pytest
from django.db import connection

WORKER = Path(__file__).with_name("dedup_worker.py")
PROCESSES = 4

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


class Race:
    """Starts worker processes that all call process() on one event id at once."""

    def __init__(self, tmp_path: Path, base: dict[str, Any]) -> None:
        self.tmp_path = tmp_path
        self.base = base | {
            "event_id": f"msg_{uuid.uuid4().hex}",
            "effects": str(tmp_path / "effects.txt"),
            "hold": 0.5,
            "lease": 60,
        }
        # The children must import this checkout's homing_receiver, however the
        # parent found it (installed, editable, or on pytest's pythonpath).
        package_root = str(Path(homing_receiver.__file__).resolve().parent.parent)
        self.env = os.environ | {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [package_root, os.environ.get("PYTHONPATH")])
            )
        }

    def run(self, count: int, **overrides: Any) -> list[str]:
        """Run *count* workers to completion; return their results ("ran", ...)."""
        run_dir = self.tmp_path / uuid.uuid4().hex
        ready = run_dir / "ready"
        ready.mkdir(parents=True)
        go = run_dir / "go"
        procs = []
        for n in range(count):
            config = (
                self.base | overrides | {"name": str(n), "ready_dir": str(ready), "go": str(go)}
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(WORKER), json.dumps(config)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=self.env,
                )
            )
        deadline = time.monotonic() + 60
        while len(list(ready.iterdir())) < count:
            failed = [p for p in procs if p.poll() not in (None, 0)]
            assert not failed, failed[0].communicate()[1]
            assert time.monotonic() < deadline, "workers never became ready"
            time.sleep(0.01)
        go.touch()

        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            if overrides.get("crash") and proc.returncode == 3:
                results.append("crashed")
                continue
            assert proc.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1])["result"])
        return results

    def effects(self) -> int:
        path = Path(self.base["effects"])
        return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def redis_race(tmp_path: Path, redis_url: str, redis_prefix: str) -> Race:
    return Race(tmp_path, {"store": "redis", "redis_url": redis_url, "prefix": redis_prefix})


@pytest.fixture
def django_race(tmp_path: Path, transactional_db: None) -> Race:
    if connection.vendor != "postgresql":
        pytest.skip("cross-process claims are tested on PostgreSQL")
    # The children configure Django themselves, pointed at this run's test database.
    keys = ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")
    database = {
        key: connection.settings_dict[key] for key in keys if key in connection.settings_dict
    }
    # A receiver's own project knows nothing of Homing's backend (core.postgresql).
    database["ENGINE"] = "django.db.backends.postgresql"
    return Race(tmp_path, {"store": "django", "database": database})


@pytest.fixture(
    params=[
        "redis",
        # pytest-django only creates the test database for static requests or marks.
        pytest.param("django", marks=pytest.mark.django_db(transaction=True)),
    ]
)
def race(request: pytest.FixtureRequest) -> Race:
    return request.getfixturevalue(f"{request.param}_race")


def test_four_processes_racing_on_one_event_run_its_handler_once(race: Race) -> None:
    results = race.run(PROCESSES)

    assert race.effects() == 1
    assert results.count("ran") == 1
    assert set(results) <= {"ran", "in_progress", "skipped"}

    # A later redelivery, in yet another process, is skipped.
    assert race.run(1) == ["skipped"]
    assert race.effects() == 1


def test_a_crashed_process_leaves_the_event_to_the_next_after_its_lease(race: Race) -> None:
    # Seconds; covers starting the next process (3 did not on a loaded CI box: it came up
    # after the lease and ran the event, as it should then).
    lease = 10
    assert race.run(1, crash=True, lease=lease) == ["crashed"]
    crashed_at = time.monotonic()
    assert race.run(1) == ["in_progress"]

    time.sleep(max(0.0, crashed_at + lease + 0.3 - time.monotonic()))

    assert race.run(PROCESSES).count("ran") == 1
    assert race.effects() == 2  # the crashed attempt's effect, then exactly one more
