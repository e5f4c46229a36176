"""Django on throwaway servers, for the bench scripts that measure in one process
(bench/backpressure.py, bench/console.py, bench/intake_cpu.py): a PostgreSQL of their
own (and a Redis, if asked), a migrated database, Django set up on them; all stopped and
removed on the way out."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def django_on_throwaway_servers(name: str, *, redis: bool, **env: str) -> Iterator[None]:
    """Within it, Django is set up on a migrated database `homing` (`env` added to the
    process's environment first, e.g. ALLOWED_HOSTS)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.harness import Postgres, Redis, ensure_binaries, server_user

    bindir, redis_binary = ensure_binaries()
    workdir = Path(tempfile.mkdtemp(prefix=f"homing-bench-{name}-"))
    if user := server_user():
        shutil.chown(workdir, user)
    postgres = Postgres(bindir, workdir, server_user())
    redis_server = Redis(redis_binary, workdir) if redis else None
    postgres.start()
    try:
        if redis_server is not None:
            redis_server.start()
            os.environ["REDIS_URL"] = redis_server.url
        createdb = [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(postgres.port)]
        subprocess.run([*createdb, "-U", "postgres", "homing"], check=True, user=server_user())
        os.environ.update(
            DATABASE_URL=postgres.url,
            SECRET_KEY=f"homing-bench-{name}",
            DJANGO_SETTINGS_MODULE="config.settings",
            **env,
        )
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        yield
    finally:
        if redis_server is not None:
            redis_server.stop()
        postgres.pg_ctl("stop")
        shutil.rmtree(workdir, ignore_errors=True)
