# Two commands: `make lab` and `make test`. Both install whatever is missing first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test install lint unit ts ui ui-deps bench faults

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The lab extension is built (npm) and copied into the venv by the pip install, which skips the build when
# its output directory is newer than its sources: a change to its sources removes the whole output (not
# only some files, which a build by hand could leave newer), so that the next install builds again.
LABEXT_SOURCES := labextension/package.json $(wildcard labextension/src/*.ts labextension/src/*/*.ts labextension/style/*)

$(STAMP): pyproject.toml $(PY) $(LABEXT_SOURCES)
	rm -rf jupyter_ckpt/labextension jupyter_ckpt/static/widget.js
	$(PY) -m pip install --quiet -e '.[test,dev]'
	touch $@

install: $(STAMP)

lab: install
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser $(ROOT_FLAG) --ServerApp.root_dir=demo_notebooks

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

unit: install
	$(PY) -m pytest tests

# The lab extension's TypeScript: biome's lint and vitest's unit tests (npm installed it with the pip install).
ts: install
	cd labextension && npm run lint && npm test

# Browser tests: Debian's chromium, never a browser downloaded by playwright.
ui-deps:
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

ui: install ui-deps
	$(PY) -m pytest ui_tests -p no:pytest_jupyter -p no:cacheprovider

test: lint ts unit ui

# Three rounds: every tool's row is the median of three alternated runs (benchmarks/README.md).
BENCH_REPEAT ?= 3
bench: install
	$(PY) benchmarks/run.py --repeat $(BENCH_REPEAT)

# 200 cycles of restore, mutate and SIGKILL (tests/faults.py); the result goes to benchmarks/results/faults.json.
faults: install
	$(PY) tests/faults.py --cycles 200
