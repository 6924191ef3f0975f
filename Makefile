# make book      build the website into _build/html (creates .venv on first use)
# make test      the full test suite as CI runs it: system packages, website build, CPU benchmark, pytest
# make gpu-test  the GPU tests (pytest -m gpu) on a machine with a CUDA GPU and CuPy
# make gpu-record  the GPU's record in benchmarks/results/: tests, speed targets, benchmarks (tools/gpu_record.py)
# make sync      write book/<chapter>.ipynb from book/<chapter>.md
# make check     is every chapter in sync and executed on a GPU with its current code?

SHELL := /bin/bash
PYTHON3 ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest for GPU tests; override on a GPU machine without the venv: make gpu-test GPU_PYTHON=python3
GPU_PYTHON ?= $(PY)

.PHONY: book test fuzz gpu-test gpu-record sync check system-packages compiler clean

$(PY):
	$(PYTHON3) -m venv $(VENV)

# Reinstall only when the requirements or the package metadata change.
$(STAMP): requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

book: $(STAMP) compiler
	$(VENV)/bin/jupyter-book build . -W -n --keep-going

# Debian packages the tests need: headless Chromium for the browser tests, clang for the CPU
# backend's Clang run, bubblewrap and libseccomp2 for the grader's sandbox. Installed with apt-get
# when missing and running as root.
SYSTEM_PACKAGES := chromium chromium-driver clang bubblewrap libseccomp2
system-packages:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && command -v clang++ >/dev/null \
		&& command -v bwrap >/dev/null && { ls /usr/lib/*/libseccomp.so.2 || ls /lib/*/libseccomp.so.2; } >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing $(SYSTEM_PACKAGES) (Debian packages) for the tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	else \
		echo "Some tests need these Debian packages: sudo apt-get install $(SYSTEM_PACKAGES)"; \
		echo "(without them those tests are skipped locally and fail in CI)"; \
	fi

# The website build runs the CPU backend (the page on running without a GPU), which needs g++.
compiler:
	@if command -v g++ >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing g++ (Debian package) for the CPU backend"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null; \
	else \
		echo "The CPU backend needs a C++ compiler: sudo apt-get install g++"; exit 1; \
	fi

# The CPU backend's benchmark prints its table into the log first; its speed goals are not a test,
# so a slow machine does not fail the run (the table says "over budget"). The student environment
# (Colab's packages, in .venv-student, rebuilt only when tools/student-env-requirements.txt changes)
# is built before pytest runs every notebook in it (tests/test_chapters_on_cpu.py).
test: $(STAMP) system-packages book
	-$(PY) benchmarks/bench_cpu_backend.py
	$(PY) tools/student_env.py --prepare
	$(PY) -m pytest -q --durations=15

# Opt-in: the kernel checks on fresh random inputs (the test suite fixes a seed per test); a failure
# prints the seed that reproduces it: check(..., seed=N).
fuzz: $(STAMP)
	COURSE_FUZZ=1 $(PY) -m pytest -q tests/kernel_checks tests/test_check.py

# Exit code 5 means no test was collected (a -m or -k filter that matches none), which is not a failure.
gpu-test:
	$(GPU_PYTHON) -m pytest -q -m gpu; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no GPU tests collected"; exit 0; fi; exit $$rc

gpu-record:
	$(GPU_PYTHON) tools/gpu_record.py

sync: $(STAMP)
	$(PY) tools/notebooks.py sync

check: $(STAMP)
	$(PY) tools/notebooks.py check

clean:
	rm -rf _build .jupyter_cache .pytest_cache
