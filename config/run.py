"""`make run`: migrate, then run every Procfile process (web, worker, scheduler).

With no DATABASE_URL/REDIS_URL it runs on the embedded defaults: a SQLite file and a
file-based Celery broker under var/, with DEBUG on and a secret key generated into
var/secret_key (config/settings.py decides this for every process). Ctrl-C stops every
process.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
    args = parser.parse_args()

    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    # config/settings.py makes the same decision, so that a manage.py command typed in
    # another shell gets the same DEBUG and secret key as these processes.
    embedded = not env.get("DATABASE_URL")
    env["PORT"] = str(args.port)

    print("==> applying database migrations", flush=True)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input"], cwd=ROOT, env=env, check=True
    )
    where = "SQLite file var/homing.sqlite3, file broker var/broker" if embedded else "DATABASE_URL"
    print(
        f"""
==> Homing is starting ({where})
    Web UI and admin:  http://127.0.0.1:{args.port}/   (staff login)
    API docs:          http://127.0.0.1:{args.port}/api/docs/
    Create a staff login:         .venv/bin/python manage.py createsuperuser
    Create a tenant and API key:  .venv/bin/python manage.py create_tenant "Acme"
                                  (the key is the last line it prints)
    Press Ctrl-C to stop web, worker and scheduler.
""",
        flush=True,
    )
    honcho = subprocess.Popen(
        [
            os.path.join(bindir, "honcho"),
            "start",
            "--procfile",
            "Procfile",
            "--port",
            str(args.port),
            "--no-colour",
        ],
        cwd=ROOT,
        env=env,
    )

    def stop(signum: int, frame: object) -> None:
        # SIGTERM, not SIGINT: a process started in the background may ignore SIGINT.
        if honcho.poll() is None:
            honcho.send_signal(signal.SIGTERM)

    # Handle Ctrl-C even if we were started with SIGINT ignored (e.g. from a script).
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return honcho.wait()


if __name__ == "__main__":
    sys.exit(main())
