#!/bin/sh
# The container image's entry point (Dockerfile). `web`, `worker` and `scheduler` run that
# line of the Procfile, so the image starts each process exactly as every other set-up
# does; arguments after the name are appended (`worker --concurrency 4`). Anything else
# runs as given (`python manage.py migrate`, `bash`).
set -eu
case "${1:-}" in
    web | worker | scheduler)
        line=$(grep "^$1: " /app/Procfile)
        shift
        # exec: the process is PID 1 and gets the stop signal itself (a warm shutdown).
        eval "exec ${line#*: }" '"$@"'
        ;;
    *)
        exec "$@"
        ;;
esac
