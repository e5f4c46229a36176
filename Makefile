# Homing developer commands. Everything installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt receiver/pyproject.toml client/pyproject.toml 2>/dev/null | cksum | cut -d' ' -f1)
PORT ?= 8000

.PHONY: venv run test test-fast test-image bench lint clean

venv: $(STAMP)

$(STAMP):
	@echo "==> creating the virtualenv in $(VENV) and installing dependencies"
	@$(PYTHON) -m venv $(VENV) || { echo "python3 -m venv failed: install the venv module (apt-get install python3-venv)"; exit 1; }
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -e './receiver[redis,django]' -e './client[django]'
	@rm -f $(VENV)/.installed-* && touch $@

run: venv
	@$(PY) -m config.run --port $(PORT)

# The whole suite: a parallel pass in TEST_WORKERS processes, then the tests that restart
# the shared servers (tests/harness.py). With ARGS, one plain pytest run of just those.
TEST_WORKERS ?= 4
test: venv
	@TEST_WORKERS=$(TEST_WORKERS) $(PY) -m tests.harness $(if $(ARGS),--durations=20 $(ARGS))

# Unit and in-process tests only: no test that starts a process (marker e2e), in
# FAST_WORKERS processes whose waits overlap (on the shared 2 cores: 176 s in one,
# 91 s in 2, 80 s in 3).
FAST_WORKERS ?= 3
test-fast: venv
	@$(PY) -m tests.harness -m "not e2e" -n $(FAST_WORKERS) $(ARGS)

# The container image (Dockerfile, compose.yaml): built with podman on a Debian base made
# once and cached, then web, worker and scheduler containers run against the test servers
# (tests/image/). Installs podman, runc and debootstrap when missing (root).
test-image: venv
	@HOMING_IMAGE_TEST=1 $(PY) -m tests.harness tests/image -s --durations=10 $(ARGS)

bench: venv
	@$(PY) -m bench.run $(ARGS)

# ruff (lint + format) and mypy with the Django and DRF stubs (configured in pyproject.toml).
lint: venv
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) var staticfiles
