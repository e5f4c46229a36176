# One image for every Homing process; the command chooses: `web` (the default), `worker`,
# `scheduler` (the Procfile's lines), or any command (`python manage.py migrate`).
# Works with `docker build` and `podman build --format docker` (for the HEALTHCHECK).
# docs/deploy.md "Container image" says how to run it; compose.yaml runs all of it.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- build: the virtualenv, made where binutils may be installed ----------------------
FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends binutils \
    > /dev/null
# The production install, requirements.txt only, in layers of their own: a code change
# rebuilds just the final stage's last two layers. Then what nothing runs goes: pip and
# setuptools, the translations (Homing's pages are English: Django's other locales are
# 11 MB of *.mo, their *.po sources more), the packages' own test suites, the API docs'
# source maps (7 MB, for debugging Swagger UI itself), and the symbols of compiled
# modules that nothing links against (uvloop ships 12 MB of them).
COPY requirements.txt /opt/homing/requirements.txt
RUN python3 -m venv /opt/homing/venv \
    && /opt/homing/venv/bin/pip install --quiet -r /opt/homing/requirements.txt \
    && /opt/homing/venv/bin/pip uninstall --yes --quiet pip setuptools \
    && find /opt/homing/venv -name '*.po' -delete \
    && find /opt/homing/venv -path '*/locale/*' -name '*.mo' ! -path '*/locale/en/*' -delete \
    && find /opt/homing/venv -depth -type d -name tests -path '*/site-packages/*' \
        -exec rm -rf {} + \
    && find /opt/homing/venv -path '*/static/*' -name '*.map' -delete \
    && find /opt/homing/venv -name '*.so' -exec strip --strip-unneeded {} +

# --- the image -------------------------------------------------------------------------
FROM ${BASE_IMAGE}
ENV PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/homing/venv \
    PATH=/opt/homing/venv/bin:$PATH

# A user with fixed ids, so `runAsNonRoot` and volume permissions can name it.
RUN groupadd --gid 10001 homing \
    && useradd --uid 10001 --gid 10001 --home-dir /app --no-create-home \
    --shell /usr/sbin/nologin homing
COPY --from=build /opt/homing/venv /opt/homing/venv

WORKDIR /app
COPY . .
# Static files (whitenoise serves them) are collected now, as links to the installed
# packages' own copies. The settings are imported with placeholder production values so
# that nothing is written besides staticfiles/ (no var/, no generated key); they are no
# secrets and no layer keeps them. var/ stays writable for the embedded set-up (no
# DATABASE_URL), which is only for trying the image alone.
RUN DATABASE_URL=postgres://build.invalid/homing REDIS_URL=redis://build.invalid:6379/0 \
    SECRET_KEY=collectstatic-placeholder \
    python manage.py collectstatic --noinput --link --verbosity 0 \
    && python -m compileall -q -j 0 . \
    && install -d -o homing -g homing var

USER 10001:10001
# Inside a container the web process listens on every interface; publish PORT to choose.
ENV HOMING_BIND=0.0.0.0 \
    PORT=8000
EXPOSE 8000
# SIGTERM: gunicorn finishes its requests, a worker finishes and records the attempts
# under way (allow it HOMING_DELIVERY_TIMEOUT + 5 s: `docker stop -t 30`, compose's
# stop_grace_period).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "/app/deploy/healthcheck.py"]
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["web"]
