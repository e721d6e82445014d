# The targets people expect. Every target installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run check test test-faults test-chaos test-browser test-interop test-client-floor test-deploy lint lint-deploy lint-proto typecheck format gen check-generate bench bench-peers bench-growth bench-memory chaos install lock check-lock clean

$(STAMP): pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,embedded]'
	$(PY) -m pip install --quiet -e ./client
	touch $(STAMP)

install: $(STAMP)

# The bench extra (the peer queues, py-spy): only the bench targets that need it install it.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

## run: the embedded stack (PostgreSQL, NATS JetStream, job_service, one worker)
run: $(STAMP)
	$(PY) -m devstack

## check: before every commit (~4 minutes on the shared 2-core machine): ruff, the format,
## the import contracts, mypy, then tests/unit and tests/integration but for the tests
## marked slow (measured at 3 s or more, or spawning OS processes), which `make test` runs
check: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy
	$(PY) -m pytest -q -m "not slow" tests/unit tests/integration

## test: the README's suite (tests/unit, tests/integration, tests/e2e: pyproject.toml's
## testpaths) against real PostgreSQL and NATS started by the tests
test: $(STAMP)
	$(PY) -m pytest -q

## test-chaos: the short, medium, cluster-short and failover chaos profiles (seed 1) as
## tests: every fault kind against the real multi-process stack, nothing lost, duplicated or
## stuck, every bound held (medium under a backlog; cluster-short on a 3-server NATS cluster;
## failover across a PostgreSQL primary's death). CI runs it after `make test` (.ci/run);
## `make chaos PROFILE=<name>` is the same run with its report.
test-chaos: $(STAMP)
	$(PY) -m pytest -q tests/chaos/test_chaos.py

## test-browser: the web console in headless Chromium against `make run`'s stack. Installs
## Debian's chromium and chromium-driver when missing (apt-get; never a downloaded browser);
## screenshots in artifacts/browser/. Not part of `make test`, which stays pip-only.
test-browser: $(STAMP)
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		echo "installing chromium and chromium-driver (Debian)"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
			chromium chromium-driver; \
	fi
	$(PY) -m pytest -q tests/browser

## test-interop: a TypeScript client generated from proto/ (protoc-gen-es run by buf, Connect's
## gRPC transport; interop/typescript) creates, watches and is refused against `make run`'s
## stack, and a TypeScript worker (nats.js) runs a job type only it declares there. Needs
## Node.js >= 20 and npm (npm ci of the pinned lock when it changed); not part of `make
## test`, which stays pip-only.
test-interop: $(STAMP)
	@command -v npm >/dev/null || { echo "make test-interop needs Node.js and npm"; exit 1; }
	JOBS_TEST_INTEROP=1 $(PY) -m pytest -q tests/interop

## test-client-floor: the client on its lowest supported versions: a fresh venv in
## build/client-floor with exactly the floors of client/pyproject.toml (protobuf, grpcio,
## googleapis-common-protos; tests/client_floor/floors.py reads them) and the client from
## client/, not editable, imports every module, runs a job and reads refusals' ErrorInfo,
## sync and asyncio, against `make run`'s stack (tests/client_floor; ~2.5 min on the shared
## 2-core machine, most of it pip and the stack's start). The newest versions are the main
## venv's, which `make test` covers. Only pip; not part of `make test`.
CLIENT_FLOOR := build/client-floor
test-client-floor: $(STAMP)
	rm -rf $(CLIENT_FLOOR)
	$(PYTHON) -m venv $(CLIENT_FLOOR)
	$(CLIENT_FLOOR)/bin/pip install --quiet $$($(PY) -m tests.client_floor.floors) ./client
	JOBS_CLIENT_FLOOR_PYTHON=$(CLIENT_FLOOR)/bin/python $(PY) -m pytest -q tests/client_floor

## test-faults: the long fault suites (tests/faults), left out of `make test` for its 15-minute budget
## (~4 minutes): killed, frozen and cut-off workers and replicas (sessions, incarnations,
## the frozen worker, crash recovery at the defaults), schedules across a replica's death,
## retention over 100,000 jobs, the scheduler's fleet tests (fairness under a 3,000-job
## backlog, concurrency keys across replicas and a killed worker, delayed jobs on time, a
## rolling deploy). .ci/run runs it.
test-faults: $(STAMP)
	$(PY) -m pytest -q tests/faults

## test-deploy: the deployment as written, executed (tests/deploy): deploy/k8s rendered with
## kustomize's rules and docker-compose.yml, every reference resolved, each container's
## command started as a local process with exactly its environment, probes driven at their
## timings, a job run, the console signed in, a rolling restart of each Deployment losing
## nothing (~70 s). Only pip-installed PostgreSQL and NATS; .ci/run runs it after `make test`.
test-deploy: $(STAMP)
	$(PY) -m pytest -q tests/deploy

lint: $(STAMP) lint-deploy
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

## lint-deploy: the Kubernetes manifests against the Kubernetes OpenAPI schemas (strict:
## unknown fields refused; kubernetes-validate ships the schemas, no network), the alert
## rules and their unit tests (alerts_test.yaml) with promtool (Debian's prometheus package: installed here when missing and we are
## root, else skipped with a notice), the Grafana dashboard against its generator.
K8S_VERSION := 1.34.0
lint-deploy: $(STAMP)
	$(VENV)/bin/kubernetes-validate --strict --quiet -k $(K8S_VERSION) \
		$(filter-out deploy/k8s/kustomization.yaml deploy/k8s/keda-scaledobject.yaml \
			deploy/k8s/monitors.yaml deploy/k8s/prometheusrule.yaml,$(wildcard deploy/k8s/*.yaml))
	@command -v promtool >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& (apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 \
			|| (apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null)); } \
		|| echo "lint-deploy: promtool not found (apt-get install prometheus); alert rules not checked"
	@if command -v promtool >/dev/null; then promtool check rules deploy/prometheus/alerts.yaml \
		deploy/prometheus/dependency-alerts.yaml \
		&& promtool test rules deploy/prometheus/alerts_test.yaml; fi
	$(PY) scripts/grafana_dashboard.py --check

## lint-proto: buf lint with the STANDARD rules (exceptions documented in buf.yaml), then
## buf breaking (FILE rules) against the last release's protos kept in proto-release/.
## Needs Node.js (npx fetches the pinned @bufbuild/buf); kept out of `make test` and `make lint`.
BUF_VERSION := 1.75.0
PROTO_RELEASE := proto-release/v0.2.0
BUF := npx --yes @bufbuild/buf@$(BUF_VERSION)
lint-proto: $(STAMP)
	@command -v npx >/dev/null || { echo "make lint-proto needs npx (Node.js)"; exit 1; }
	$(BUF) lint
	$(BUF) breaking --against $(PROTO_RELEASE)

## typecheck: mypy strict (pydantic plugin) over the three packages; generated code excluded
typecheck: $(STAMP)
	$(PY) -m mypy

format: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# The client's stubs come from an older grpcio-tools than the server's, so that they load on
# protobuf 6 and 7 (client/protoc-requirements.in): that generator, hash-pinned, in its own venv.
CLIENT_PROTOC := build/client-protoc
CLIENT_PROTOC_STAMP := $(CLIENT_PROTOC)/.installed
$(CLIENT_PROTOC_STAMP): client/protoc-requirements.txt
	rm -rf $(CLIENT_PROTOC)
	$(PYTHON) -m venv $(CLIENT_PROTOC)
	$(CLIENT_PROTOC)/bin/pip install --quiet --require-hashes --no-deps \
		-r client/protoc-requirements.txt
	touch $(CLIENT_PROTOC_STAMP)

## gen: regenerate shared/pb from proto/ (the dev extra's grpcio-tools) and the client's
## stubs (the older grpcio-tools of client/protoc-requirements.txt, in build/client-protoc)
gen: $(STAMP) $(CLIENT_PROTOC_STAMP)
	$(PY) scripts/generate_protos.py shared client

check-generate: $(STAMP) $(CLIENT_PROTOC_STAMP)
	$(PY) scripts/generate_protos.py --check shared client

## bench: end-to-end throughput and latency through the embedded stack
bench: $(STAMP)
	$(PY) -m bench.e2e

## bench-peers: this engine, pgqueuer and procrastinate side by side on one PostgreSQL, two
## worker processes each: backlog drain, steady 200/s p50/p99, the engine's stage breakdown
bench-peers: $(BENCH_STAMP)
	$(PY) -m bench.peers

## bench-growth: create, get, lock and submit p50 on an empty database and on one holding
## 1,000,000 finished and 100,000 waiting jobs, with the EXPLAIN of each hot statement
bench-growth: $(STAMP)
	$(PY) -m bench.growth

## bench-memory: RSS of one worker with 1,000 jobs in flight and of job_service over three
## back-to-back drains
bench-memory: $(STAMP)
	$(PY) -m bench.memory

## chaos: fault injection over the real multi-process stack, then a checker of every job
## (PROFILE=short, the default; PROFILE=medium: the long profile's load and faults in about
## 2 minutes; both also run by `make test-chaos` in CI; PROFILE=long: thousands of jobs;
## PROFILE=cluster: a three-server NATS cluster, PROFILE=cluster-short its server faults
## once each; PROFILE=failover: a PostgreSQL failover)
PROFILE ?= short
SEED ?= 1
chaos: $(STAMP)
	$(PY) -m tests.chaos --profile $(PROFILE) --seed $(SEED)

## lock: requirements.lock, every dependency of the production image pinned with hashes
## (pip-tools, pinned in the dev extra); check-lock fails when pyproject.toml moved on
lock: $(STAMP)
	$(VENV)/bin/pip-compile --quiet --strip-extras --generate-hashes --allow-unsafe \
		--build-deps-for wheel \
		--no-emit-index-url --no-emit-find-links --output-file requirements.lock pyproject.toml

check-lock: $(STAMP)
	cp requirements.lock /tmp/requirements.lock.check
	$(VENV)/bin/pip-compile --quiet --strip-extras --generate-hashes --allow-unsafe \
		--build-deps-for wheel \
		--no-emit-index-url --no-emit-find-links --output-file /tmp/requirements.lock.check pyproject.toml
	diff -u -I "^#    pip-compile" requirements.lock /tmp/requirements.lock.check

clean:
	rm -rf $(VENV) .pytest_cache
