# omnicall: `make run` starts the assistant, `make test` runs ruff, mypy and the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
DEBIAN_PACKAGES := chromium espeak-ng ffmpeg redis-server nodejs npm
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test lint typecheck unit deps system-deps bench clean lock docs

# llama-cpp-python compiles from source (portable flags; ~8-20 min on 2 cores, once).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet torch==2.13.0
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" $(PIP) install --quiet -c constraints.txt -e '.[dev]'
	$(PY) -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $@

deps: $(STAMP)

# Refresh the lock (constraints.txt) from pyproject.toml with pip's resolver: newest releases
# that fit, nothing installed or built (a throwaway venv runs pip; sdists give metadata only).
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" $(LOCK_VENV)/bin/python -m pip install \
	  --quiet --dry-run --ignore-installed --report $(LOCK_VENV)/report.json \
	  torch==2.13.0 -e '.[dev]'
	$(LOCK_VENV)/bin/python .ci/lock.py write $(LOCK_VENV)/report.json
	rm -rf $(LOCK_VENV)

# Debian packages the browser tests, speech fixtures and the Redis store tests need (installed
# when missing, as root; the tests start their own redis-server on a free port).
system-deps:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v espeak-ng >/dev/null || missing="$$missing espeak-ng"; \
	command -v ffmpeg >/dev/null || missing="$$missing ffmpeg"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  else echo "please install:$$missing (sudo apt-get install$$missing)"; exit 1; fi; \
	fi

run: $(STAMP)
	$(VENV)/bin/omnicall serve --host $(HOST) --port $(PORT)

# TypeScript (pinned in tests/typescript/package-lock.json) compiles the JavaScript client
# library's declarations in use, in strict mode (tests/test_js_client.py runs it).
TSC := tests/typescript/node_modules/.bin/tsc
$(TSC): tests/typescript/package-lock.json | system-deps
	npm ci --prefix tests/typescript --no-audit --no-fund --silent
	touch $@

lint: $(STAMP)
	$(VENV)/bin/ruff check app media engine omnicall examples tests bench

# mypy does not follow setuptools' package-dir mapping (omnicall.app -> app/), so it checks a
# tree of links laid out the way the wheel installs it.
TYPECHECK_TREE := build/typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK_TREE) && mkdir -p $(TYPECHECK_TREE)/omnicall
	for f in omnicall/*.py; do ln -s "$(CURDIR)/$$f" $(TYPECHECK_TREE)/$$f; done
	for d in app engine media; do ln -s "$(CURDIR)/$$d" $(TYPECHECK_TREE)/omnicall/$$d; done
	cd $(TYPECHECK_TREE) && "$(CURDIR)/$(VENV)/bin/mypy" --config-file "$(CURDIR)/pyproject.toml"

unit: $(STAMP)
	$(PY) -m pytest -q

test: $(STAMP) system-deps lint typecheck $(TSC) unit

bench: $(STAMP) system-deps
	$(PY) bench/pipeline_rtt.py

# docs/configuration.md from app/config.py (tests/test_config_docs.py fails when it is stale).
docs: $(STAMP)
	$(PY) -m omnicall.app.config_docs

clean:
	rm -rf $(VENV) build .mypy_cache .ruff_cache .pytest_cache *.egg-info test-artifacts \
	  tests/typescript/node_modules

# The container image and real calls against it: minutes each, so not part of `make test`
# (docs/deploy.md has the results). `deploy/smoke.sh base` first where no registry is reachable.
.PHONY: image image-smoke compose-smoke
image:
	deploy/smoke.sh build

image-smoke: $(STAMP)
	deploy/smoke.sh image

compose-smoke: $(STAMP)
	deploy/smoke.sh compose
