"""The container image's HEALTHCHECK: `GET /healthz` answers 200 in a web container.

One image runs every process, so the check looks for gunicorn among the container's
processes; a worker or scheduler container has nothing to ask and is healthy while it
runs (its process manager restarts it when it exits). Django answers 400 to a host
outside `ALLOWED_HOSTS`, so the request names the first allowed host.
"""

from __future__ import annotations

import http.client
import os
import sys
from pathlib import Path

TIMEOUT_SECONDS = 4
# A web process bound to every interface is asked on loopback.
EVERY_INTERFACE = ("0.0.0.0", "::")  # noqa: S104 (compared with, not bound to)


def web_runs_here() -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"gunicorn" in cmdline.read_bytes():
                return True
        except OSError:  # the process ended meanwhile
            continue
    return False


def host_header() -> str:
    allowed = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
    first = allowed[0].lstrip(".") if allowed else "localhost"
    return "localhost" if first == "*" else first


def main() -> int:
    if not web_runs_here():
        return 0
    bind = os.environ.get("HOMING_BIND") or EVERY_INTERFACE[0]
    address = "127.0.0.1" if bind in EVERY_INTERFACE else bind
    connection = http.client.HTTPConnection(
        address, int(os.environ.get("PORT", "8000")), timeout=TIMEOUT_SECONDS
    )
    try:
        connection.request("GET", "/healthz", headers={"Host": host_header()})
        status = connection.getresponse().status
    except OSError as exc:
        print(f"/healthz: {exc}", file=sys.stderr)
        return 1
    print(f"/healthz: {status}")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
