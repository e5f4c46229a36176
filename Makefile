# Homing developer commands. Everything installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt receiver/pyproject.toml client/pyproject.toml 2>/dev/null | cksum | cut -d' ' -f1)
PORT ?= 8000

.PHONY: venv run test bench lint clean

venv: $(STAMP)

$(STAMP):
	@echo "==> creating the virtualenv in $(VENV) and installing dependencies"
	@$(PYTHON) -m venv $(VENV) || { echo "python3 -m venv failed: install the venv module (apt-get install python3-venv)"; exit 1; }
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -e './receiver[redis,django]' -e './client[django]'
	@rm -f $(VENV)/.installed-* && touch $@

run: venv
	@$(PY) -m config.run --port $(PORT)

test: venv
	@$(PY) -m tests.harness $(ARGS)

bench: venv
	@$(PY) -m bench.run $(ARGS)

# ruff (lint + format) and mypy with the Django and DRF stubs (configured in pyproject.toml).
lint: venv
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) var staticfiles
