"""A separate OS process that calls Deduplicator.process once (see test_dedup_processes).

Run as ``python dedup_worker.py '<json config>'``. It reports readiness by creating
``<ready_dir>/<name>``, waits for the ``go`` file so that all workers race together,
then prints one JSON line: {"result": "ran" | "skipped" | "in_progress"}.

The handler's only effect is appending one line to ``effects``; counting the lines
afterwards tells how many handlers really ran. With ``"crash": true`` the handler
kills the process after its effect, leaving its claim behind as a crash would.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def make_store(config: dict[str, Any]) -> Any:
    if config["store"] == "redis":
        import redis
        from homing_receiver import RedisStore

        return RedisStore(redis.Redis.from_url(config["redis_url"]), prefix=config["prefix"])

    import django
    from django.conf import settings

    settings.configure(
        DATABASES={"default": config["database"]},
        INSTALLED_APPS=["homing_receiver.django"],
        USE_TZ=True,
    )
    django.setup()
    from homing_receiver.django import DjangoStore

    return DjangoStore()


def main() -> None:
    config = json.loads(sys.argv[1])
    from homing_receiver import Deduplicator, DuplicateInProgress

    dedup = Deduplicator(make_store(config), lease=config["lease"])
    effects = Path(config["effects"])

    def handler() -> None:
        with effects.open("a") as out:
            out.write(f"{os.getpid()}\n")
        if config.get("crash"):
            os._exit(3)  # no release, no complete: the claim stays until its lease ends
        time.sleep(config["hold"])

    (Path(config["ready_dir"]) / config["name"]).touch()
    go = Path(config["go"])
    deadline = time.monotonic() + 30
    while not go.exists():
        if time.monotonic() > deadline:
            sys.exit("never told to go")
        time.sleep(0.002)

    try:
        result = "ran" if dedup.process(config["event_id"], handler) else "skipped"
    except DuplicateInProgress:
        result = "in_progress"
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    main()
