# make book      build the website into _build/html (creates .venv on first use)
# make test      the full test suite as CI runs it: browser, website build, pytest
# make gpu-test  the GPU tests (pytest -m gpu) on a machine with a CUDA GPU and CuPy
# make sync      write book/<chapter>.ipynb from book/<chapter>.md
# make check     is every chapter in sync and executed on a GPU with its current code?

SHELL := /bin/bash
PYTHON3 ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest for GPU tests; override on a GPU machine without the venv: make gpu-test GPU_PYTHON=python3
GPU_PYTHON ?= $(PY)

.PHONY: book test gpu-test sync check chromium clean

$(PY):
	$(PYTHON3) -m venv $(VENV)

# Reinstall only when the requirements or the package metadata change.
$(STAMP): requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . -W -n --keep-going

# Headless Chromium for the browser tests: installed with apt-get when missing and running as root.
chromium:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing chromium and chromium-driver (Debian packages) for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else \
		echo "Browser tests need headless Chromium: sudo apt-get install chromium chromium-driver"; \
		echo "(without it they are skipped locally and fail in CI)"; \
	fi

test: $(STAMP) chromium book
	$(PY) -m pytest -q

# Exit code 5 means no test was collected: no GPU tests exist yet, which is not a failure.
gpu-test:
	$(GPU_PYTHON) -m pytest -q -m gpu; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no GPU tests collected"; exit 0; fi; exit $$rc

sync: $(STAMP)
	$(PY) tools/notebooks.py sync

check: $(STAMP)
	$(PY) tools/notebooks.py check

clean:
	rm -rf _build .jupyter_cache .pytest_cache
